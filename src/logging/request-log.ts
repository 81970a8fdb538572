import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { PinoLogger } from 'nestjs-pino';
import { principalOf } from '../auth/principal.decorator';
import { requestIdOf } from '../common/request-id.middleware';
import { routeOf } from '../metrics/http-metrics.middleware';

/**
 * One line per request, written when its answer is done (or the client
 * left): request id, tenant (once the access guard resolved it), method,
 * route pattern, path, status and duration. Never headers (tokens), query
 * strings or bodies (payloads). 5xx lines are errors, 4xx and 503 warnings,
 * the rest info.
 *
 * Written with the application's pino logger directly rather than through
 * pino-http, whose per-request child logger and serialisers cost the lease
 * route twice as much throughput (bench/RESULTS.md).
 */
export function requestLogMiddleware(): RequestHandler {
  const logger = PinoLogger.root;
  return (request: Request, response: Response, next: NextFunction): void => {
    const started = performance.now();
    response.once('close', () => {
      const status = response.statusCode;
      // 503 is a broker draining or asking to be retried elsewhere: expected, not an error.
      const level = status >= 500 && status !== 503 ? 'error' : status >= 400 ? 'warn' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      logger[level](
        {
          requestId: requestIdOf(request),
          tenant: principalOf(request)?.tenantId,
          method: request.method,
          route: routeOf(request),
          path: request.originalUrl.split('?')[0],
          status,
          durationMs: Math.round(performance.now() - started),
          ...(response.writableFinished ? {} : { aborted: true }),
        },
        'request',
      );
    });
    next();
  };
}
