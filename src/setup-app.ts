import { NestApplicationOptions } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { RequestHandler } from 'express';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { serveConsole } from './console/serve-console';
import { requestIdMiddleware } from './common/request-id.middleware';
import { APP_CONFIG, AppConfig } from './config/app-config';
import { RequestBodyInterceptor } from './http/request-body.interceptor';
import { LeaseFastPathMiddleware } from './lease/lease-fast-path.middleware';
import { decodesCleanly, matchLeaseExtend } from './lease/lease-route';
import { ProbeService } from './health/probe.service';
import { DrainService } from './lifecycle/drain.service';
import { requestLogger } from './logging/request-log';
import { ROOT_LOGGER, RootLogger } from './logging/root-logger';
import { observeRequests } from './metrics/http-metrics.middleware';
import { MetricsService } from './metrics/metrics.service';

/** Nest's own body parser is off: bodies are read after authentication (RequestBodyInterceptor). */
export const APP_OPTIONS: NestApplicationOptions = { bodyParser: false };

export interface SetupOptions {
  /**
   * Serve the lease route ahead of the router (LeaseFastPathMiddleware). On
   * by default; tests turn it off to compare it with the router's answers.
   */
  leaseFastPath?: boolean;
}

/** Everything main.ts and the e2e tests share: middleware, body reading, the error filter, Swagger. */
export function setupApp(app: NestExpressApplication, options: SetupOptions = {}): void {
  const config = app.get<AppConfig>(APP_CONFIG);

  app.disable('x-powered-by');
  // No conditional GETs on a queue API: hashing every response body for an ETag is wasted work.
  app.set('etag', false);
  app.use(requestIdMiddleware);
  app.use(
    observeRequests(
      app.get(MetricsService),
      config.log.requests ? requestLogger(app.get<RootLogger>(ROOT_LOGGER)) : undefined,
    ),
  );
  app.use(app.get(DrainService).middleware);
  app.use(app.get(ProbeService).middleware);
  if (options.leaseFastPath ?? true) {
    const leaseFastPath = app.get(LeaseFastPathMiddleware);
    app.use(leaseFastPath.use.bind(leaseFastPath));
  }
  app.use(beforeRouting);
  if (config.consoleEnabled) serveConsole(app);
  app.useGlobalFilters(new HttpExceptionFilter());
  // Bodies are read after the guards: see RequestBodyInterceptor.
  app.useGlobalInterceptors(new RequestBodyInterceptor(app.get(Reflector), config));
  if (config.docsEnabled) setupSwagger(app);
}

/**
 * A lease id that is not a UUID answers 200 with renewed 0 like any unknown
 * one, never a 400 that would set it apart; that includes a path value whose
 * percent-encoding does not decode, which Express would refuse. Escaping its
 * % signs lets the route see, and echo, the value as sent.
 */
const beforeRouting: RequestHandler = (request, _response, next) => {
  const lease = matchLeaseExtend(request.url);
  if (lease && !decodesCleanly(lease.segment)) {
    request.url = `${lease.prefix}${lease.segment.replace(/%/g, '%25')}${lease.suffix}`;
  }
  next();
};

function setupSwagger(app: NestExpressApplication): void {
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Leasehold')
      .setDescription(
        'Multi-tenant message-queue broker on PostgreSQL whose consumers hold leases on what they pop and ' +
          'extend them while a slow handler is still working. HTTP surface of the Queen MQ v1 reference. ' +
          'Every error the broker produces is {"error": "..."}. While a broker drains for shutdown, any route ' +
          'answers 503 {"error": "shutting down"} with Retry-After: 1 and Connection: close: retry on another broker.',
      )
      .setVersion('1')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
      .build(),
  );
  dropDuplicateSecurity(document);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'docs-json',
    customSiteTitle: 'Leasehold',
    swaggerOptions: { persistAuthorization: true },
  });
}

/**
 * @Access adds the bearer requirement to every protected handler, and a
 * controller may carry @ApiBearerAuth() as well; Swagger concatenates the
 * two, so each operation keeps one copy of each requirement.
 */
function dropDuplicateSecurity(document: OpenAPIObject): void {
  for (const pathItem of Object.values(document.paths)) {
    for (const operation of Object.values(pathItem)) {
      const security = (operation as { security?: unknown[] } | undefined)?.security;
      if (!Array.isArray(security)) continue;
      const unique = new Map(security.map((requirement) => [JSON.stringify(requirement), requirement]));
      (operation as { security: unknown[] }).security = [...unique.values()];
    }
  }
}
