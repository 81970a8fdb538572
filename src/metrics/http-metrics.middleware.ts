import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { PROBE_PATHS } from '../health/probe.service';
import { CONSOLE_PATH } from '../http/pages';
import { arrivalOf } from '../http/fair-dispatch';
import { LEASE_EXTEND_ROUTE, matchLeaseExtend } from '../lease/lease-route';
import { PUSH_ROUTE } from '../push/push-route';
import { ACK_BATCH_ROUTE, ACK_ROUTE } from '../ack/ack-route';
import { POP_PARTITION_ROUTE, POP_QUEUE_ROUTE } from '../pop/pop-route';
import type { RequestLogger } from '../logging/request-log';
import { MetricsService } from './metrics.service';

const FAST_ROUTE_PATTERNS = [PUSH_ROUTE, ACK_ROUTE, ACK_BATCH_ROUTE, POP_QUEUE_ROUTE, POP_PARTITION_ROUTE];

/** By route pattern, never by the raw path: a lease id or queue name in a label would make a series per id. */
export function observeRequests(metrics: MetricsService, log?: RequestLogger): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    const started = arrivalOf(request) ?? performance.now();
    // Once per response; once() would hold two more objects per request while it runs.
    response.on('close', () => {
      const durationMs = performance.now() - started;
      const route = routeOf(request);
      metrics.httpDuration.observe(
        { method: request.method, route, status_class: `${Math.floor(response.statusCode / 100)}xx` },
        durationMs / 1000,
      );
      log?.(request, response, durationMs, route);
    });
    next();
  };
}

export function routeOf(request: Request): string {
  const route = (request.route as { path?: unknown } | undefined)?.path;
  // Nest answers unknown paths from a catch-all route: not a route of the API.
  if (typeof route === 'string' && !route.includes('*')) return `${request.baseUrl}${route}`;
  // Served ahead of the router (FastPathMiddleware, ProbeService), so Express never sets their route.
  if (matchLeaseExtend(request.originalUrl)) return LEASE_EXTEND_ROUTE;
  const fast = FAST_ROUTE_PATTERNS.find((candidate) => candidate.matches(request.originalUrl));
  if (fast) return fast.path;
  if (PROBE_PATHS.includes(request.path)) return request.path;
  if (request.path === CONSOLE_PATH || request.path.startsWith(`${CONSOLE_PATH}/`)) return CONSOLE_PATH;
  return 'unmatched';
}
