import type { Request, Response } from 'express';
import { principalOf } from '../auth/principal.decorator';
import { requestIdOf } from '../common/request-id.middleware';
import { PROBE_PATHS } from '../health/probe.service';
import type { RootLogger } from './root-logger';

export type RequestLogger = (request: Request, response: Response, durationMs: number, route: string) => void;

const DATABASE_FAILURE = Symbol('leasehold:answered-database-failure');

/** The answer is a 500 the database caused (`pool`, `database timeout`, `renew failed: ...`), not a bug of ours. */
export function answeredDatabaseFailure(response: Response): void {
  (response as Response & { [DATABASE_FAILURE]?: boolean })[DATABASE_FAILURE] = true;
}

function databaseFailed(response: Response): boolean {
  return (response as Response & { [DATABASE_FAILURE]?: boolean })[DATABASE_FAILURE] === true;
}

/**
 * Never headers (tokens), query strings or bodies (payloads). pino directly: pino-http's per-request child logger
 * and serialisers cost the lease route twice as much throughput (bench/RESULTS.md).
 */
export function requestLogger(logger: RootLogger): RequestLogger {
  return (request, response, durationMs, route) => {
    const status = response.statusCode;
    // 503 is a drain or a retry-elsewhere, and a database failure a fault to retry, not errors of ours; a healthy
    // probe is noise at info (load balancers ask often).
    const level =
      status >= 500 && status !== 503 && !databaseFailed(response)
        ? 'error'
        : status >= 400
          ? 'warn'
          : PROBE_PATHS.includes(route)
            ? 'debug'
            : 'info';
    if (!logger.isLevelEnabled(level)) return;
    logger[level](
      {
        requestId: requestIdOf(request),
        tenant: principalOf(request)?.tenantId,
        method: request.method,
        route,
        path: request.originalUrl.split('?')[0],
        status,
        durationMs: Math.round(durationMs),
        ...(response.writableFinished ? {} : { aborted: true }),
      },
      'request',
    );
  };
}
