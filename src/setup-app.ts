import { NestApplicationOptions } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import express, { ErrorRequestHandler, RequestHandler } from 'express';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { requestIdMiddleware } from './common/request-id.middleware';
import { APP_CONFIG, AppConfig } from './config/app-config';

/** Nest's own body parser is off: setupApp installs parsers per route family. */
export const APP_OPTIONS: NestApplicationOptions = { bodyParser: false };

const LEASE_EXTEND_PATH = '/api/v1/lease/:leaseId/extend';
const POP_PATH = '/api/v1/pop';

/** Everything main.ts and the e2e tests share: parsers, the error filter, Swagger. */
export function setupApp(app: NestExpressApplication): void {
  const config = app.get<AppConfig>(APP_CONFIG);
  const limit = config.bodyLimitBytes;

  app.disable('x-powered-by');
  app.use(requestIdMiddleware);
  app.use(POP_PATH, refuseHead);
  app.use(keepUndecodableLeaseIds);
  // The lease route must see the raw bytes: its lenient pipe, not Express,
  // decides what a malformed body means (60 seconds, never a 400).
  app.use(LEASE_EXTEND_PATH, express.raw({ type: () => true, limit }), lenientBodyErrors);
  app.use(
    express.json({ limit, type: ['application/json', 'application/*+json'] }),
    // Any other body is read only to hold it to the same limit, then dropped:
    // the routes take JSON, and an oversized body is a 413 whatever its type.
    express.raw({ type: () => true, limit, verify: (request) => unparsedBodies.add(request) }),
    dropUnparsedBody,
    bodyParserErrors,
  );
  app.useGlobalFilters(new HttpExceptionFilter());
  setupSwagger(app);
}

const LEASE_EXTEND_URL = /^(\/api\/v1\/lease\/)([^/?]*)(\/extend\/?(?:\?.*)?)$/i;

/**
 * A lease id that is not a UUID answers 200 with renewed 0 like any unknown
 * one, never a 400 that would set it apart; that includes a path value whose
 * percent-encoding does not decode, which Express would otherwise refuse.
 * Escaping its % signs lets the route see, and echo, the value as sent.
 */
const keepUndecodableLeaseIds: RequestHandler = (request, _response, next) => {
  const match = LEASE_EXTEND_URL.exec(request.url);
  if (match && !decodes(match[2])) {
    request.url = `${match[1]}${match[2].replace(/%/g, '%25')}${match[3]}`;
  }
  next();
};

function decodes(segment: string): boolean {
  try {
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}

/**
 * Express answers HEAD with the GET handler and drops the body. On the pop
 * routes that handler claims messages, so a HEAD would lease them under an
 * id nobody receives, and hold them back until the lease expired.
 */
const refuseHead: RequestHandler = (request, response, next) => {
  if (request.method !== 'HEAD') {
    next();
    return;
  }
  response.setHeader('Allow', 'GET');
  response.status(405).json({ error: 'method not allowed' });
};

/** On the lease route only an oversized body is an error; any other decoding failure means "no body". */
const lenientBodyErrors: ErrorRequestHandler = (error, request, response, next) => {
  if ((error as { type?: string }).type === 'entity.too.large') {
    next(error);
    return;
  }
  request.body = undefined;
  next();
};

const unparsedBodies = new WeakSet<object>();

const dropUnparsedBody: RequestHandler = (request, _response, next) => {
  if (unparsedBodies.has(request)) request.body = undefined;
  next();
};

const bodyParserErrors: ErrorRequestHandler = (error, _request, response, next) => {
  const { type, status } = error as { type?: string; status?: number };
  if (type === 'entity.too.large') {
    response.status(413).json({ error: 'payload too large' });
  } else if (type === 'entity.parse.failed') {
    response.status(400).json({ error: 'invalid JSON body' });
  } else if (typeof status === 'number' && status >= 400 && status < 500) {
    response.status(status).json({ error: (error as Error).message });
  } else {
    next(error);
  }
};

function setupSwagger(app: NestExpressApplication): void {
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Leasehold')
      .setDescription(
        'Multi-tenant message-queue broker on PostgreSQL whose consumers hold leases on what they pop and ' +
          'extend them while a slow handler is still working. HTTP surface of the Queen MQ v1 reference. ' +
          'Every error the broker produces is {"error": "..."}.',
      )
      .setVersion('1')
      .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' })
      .build(),
  );
  dropDuplicateSecurity(document);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'docs-json',
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
