import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import { PinoLogger } from 'nestjs-pino';
import { pinoHttp } from 'pino-http';
import { principalOf } from '../auth/principal.decorator';
import { requestIdOf } from '../common/request-id.middleware';
import { routeOf } from '../metrics/http-metrics.middleware';

/**
 * One line per request, written when its answer is done: request id,
 * tenant (once the access guard resolved it), method, route pattern, path,
 * status and duration. Never headers (tokens), query strings or bodies
 * (payloads). 5xx lines are errors, 4xx and 503 warnings, the rest info.
 */
export function requestLogMiddleware(): RequestHandler {
  const middleware = pinoHttp({
    logger: PinoLogger.root,
    genReqId: (request) => requestIdOf(request as Request),
    quietReqLogger: true,
    // Nothing of the request or response objects themselves: their headers carry tokens.
    serializers: { req: () => undefined, res: () => undefined, err: () => undefined },
    customAttributeKeys: { reqId: 'requestId', responseTime: 'durationMs' },
    // 503 is a broker draining or asking to be retried elsewhere: expected, not an error.
    customLogLevel: (_request, response, error) =>
      error || (response.statusCode >= 500 && response.statusCode !== 503) ? 'error' : response.statusCode >= 400 ? 'warn' : 'info',
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
    customSuccessObject: (request, response, logged: { durationMs?: number }) => line(request, response, logged),
    customErrorObject: (request, response, _error, logged: { durationMs?: number }) => line(request, response, logged),
  });
  return middleware as unknown as RequestHandler;
}

function line(request: IncomingMessage, response: ServerResponse, logged: { durationMs?: number }): Record<string, unknown> {
  const express = request as Request;
  return {
    tenant: principalOf(express)?.tenantId,
    method: express.method,
    route: routeOf(express),
    path: express.originalUrl.split('?')[0],
    status: response.statusCode,
    durationMs: logged.durationMs,
  };
}
