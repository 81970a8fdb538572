import { NestApplicationOptions } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { LeaseholdHttpAdapter } from './http/http-adapter';
import { inSequence } from './http/in-sequence';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { serveConsole } from './console/serve-console';
import { requestIdMiddleware } from './common/request-id.middleware';
import { APP_CONFIG, AppConfig } from './config/app-config';
import { RequestBodyInterceptor } from './http/request-body.interceptor';
import { crossSiteCheck } from './http/cross-site';
import { FastPathMiddleware } from './http/fast-path.middleware';
import { FastRouteTable } from './http/fast-route-table';
import { DOCS_HEADERS, DOCS_JSON_PATH, DOCS_PATH, DOCS_YAML_PATH, withHeaders } from './http/pages';
import { ProbeService } from './health/probe.service';
import { DrainService } from './lifecycle/drain.service';
import { requestLogger } from './logging/request-log';
import { ROOT_LOGGER, RootLogger } from './logging/root-logger';
import { observeRequests } from './metrics/http-metrics.middleware';
import { MetricsService } from './metrics/metrics.service';

/** Nest's own body parser is off: bodies are read after authentication (RequestBodyInterceptor). */
export const APP_OPTIONS: NestApplicationOptions = { bodyParser: false };

export interface SetupOptions {
  /** On by default; tests turn it off to compare the fast path with the router's answers. */
  fastPath?: boolean;
}

const PASSED_ON = Symbol('passedOn');
type PassedOn = Request & { [PASSED_ON]?: { error: unknown } };

export function setupApp(app: NestExpressApplication, options: SetupOptions = {}): void {
  const config = app.get<AppConfig>(APP_CONFIG);

  app.disable('x-powered-by');
  // No conditional GETs on a queue API: hashing every response body for an ETag is wasted work.
  app.set('etag', false);
  const fastPath = (options.fastPath ?? true) ? app.get(FastPathMiddleware) : undefined;
  fastPath?.enable();
  const routes = app.get(FastRouteTable);
  app.get(MetricsService).watchFastPath(() => fastPath?.routes ?? []);
  const beforeRoutes = inSequence([
    requestIdMiddleware,
    observeRequests(
      app.get(MetricsService),
      routes,
      config.log.requests ? requestLogger(app.get<RootLogger>(ROOT_LOGGER)) : undefined,
    ),
    app.get(DrainService).middleware,
    crossSiteCheck(config.http.allowedOrigins),
    app.get(ProbeService).middleware,
    ...(fastPath ? [fastPath.use.bind(fastPath) as RequestHandler] : []),
    keepUndecodableSegments(routes),
  ]);
  const adapter = app.getHttpAdapter();
  if (adapter instanceof LeaseholdHttpAdapter) app.get(MetricsService).watchDispatch(adapter.dispatch);
  if (fastPath && adapter instanceof LeaseholdHttpAdapter) {
    // The fast routes skip Express altogether: its dispatch cost the lease route a tenth of its throughput.
    adapter.setFrontDoor({
      accepts: (request) => fastPath.accepts(request),
      serve: (request, response, next) =>
        beforeRoutes(request, response, (error?: unknown) => {
          (request as PassedOn)[PASSED_ON] = { error };
          next();
        }),
    });
  }
  // What the front door passed on has been through these already: only its outcome carries on.
  app.use((request: Request, response: Response, next: NextFunction) => {
    const passed = (request as PassedOn)[PASSED_ON];
    if (passed) next(passed.error);
    else beforeRoutes(request, response, next);
  });
  if (config.consoleEnabled) serveConsole(app);
  app.useGlobalFilters(new HttpExceptionFilter());
  app.useGlobalInterceptors(new RequestBodyInterceptor(app.get(Reflector), config));
  if (config.docsEnabled) setupSwagger(app);
}

/**
 * A segment of a @KeepsUndecodable() parameter reaches the router's handler as sent, as on the fast path, where Express
 * would refuse it with 400: e.g. a lease id that is not a UUID answers 200 with renewed 0 like any unknown one.
 */
function keepUndecodableSegments(routes: FastRouteTable): RequestHandler {
  return (request, _response, next) => {
    const escaped = routes.escapeUndecodable(request.url, request.method);
    if (escaped !== undefined) request.url = escaped;
    next();
  };
}

function setupSwagger(app: NestExpressApplication): void {
  // Before Swagger's own routes and files, so every answer under them carries the page's headers.
  app.use([DOCS_PATH, DOCS_JSON_PATH, DOCS_YAML_PATH], withHeaders(DOCS_HEADERS));
  // Built when first asked for, not at boot: most brokers never serve it, and it is megabytes of heap.
  SwaggerModule.setup(DOCS_PATH, app, () => documentOf(app), {
    jsonDocumentUrl: DOCS_JSON_PATH,
    yamlDocumentUrl: DOCS_YAML_PATH,
    customSiteTitle: 'Leasehold',
    // Kept in memory only: a persisted token would sit in this origin's localStorage, the console's too.
    swaggerOptions: { persistAuthorization: false },
  });
}

function documentOf(app: NestExpressApplication): OpenAPIObject {
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
      // Swagger UI lists the groups in this order: what a producer and a consumer call first, first.
      .addTag('messages', 'Push, pop, ack and nack, atomic transactions, and browsing what is stored')
      .addTag('lease', "Extend a pop's lease while a slow handler is still working")
      .addTag('queues', 'Create and configure queues; what they hold; the dead-letter queue')
      .addTag('consumer groups', 'Lag, seek and delete')
      .addTag('streams', "The server of Queen 0.15's streaming SDK")
      .addTag('traces', "Queen's message traces")
      .addTag('maintenance', "Pause a tenant's pushes or pops")
      .addTag('auth', 'Who the token says the caller is')
      .addTag('health', 'Probes for orchestrators')
      .build(),
  );
  dropDuplicateSecurity(document);
  return document;
}

/** @Access and a controller's @ApiBearerAuth() both add the bearer requirement, which Swagger concatenates. */
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
