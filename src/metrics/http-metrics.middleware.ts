import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { PROBE_PATHS } from '../health/probe.service';
import { CONSOLE_PATH } from '../http/pages';
import { arrivalOf } from '../http/fair-dispatch';
import type { RequestLogger } from '../logging/request-log';
import { MetricsService } from './metrics.service';

/** The routes served ahead of the router, whose requests Express never gives a route. */
interface RoutesAhead {
  pathOf(url: string, method?: string): string | undefined;
}

/** By route pattern, never by the raw path: a lease id or queue name in a label would make a series per id. */
export function observeRequests(metrics: MetricsService, ahead: RoutesAhead, log?: RequestLogger): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    const started = arrivalOf(request) ?? performance.now();
    // Once per response; once() would hold two more objects per request while it runs.
    response.on('close', () => {
      const durationMs = performance.now() - started;
      const route = routeOf(request, ahead);
      metrics.httpDuration.observe(
        { method: request.method, route, status_class: `${Math.floor(response.statusCode / 100)}xx` },
        durationMs / 1000,
      );
      log?.(request, response, durationMs, route);
    });
    next();
  };
}

export function routeOf(request: Request, ahead: RoutesAhead): string {
  const route = (request.route as { path?: unknown } | undefined)?.path;
  // Nest answers unknown paths from a catch-all route: not a route of the API.
  if (typeof route === 'string' && !route.includes('*')) return `${request.baseUrl}${route}`;
  // Served ahead of the router (FastPathMiddleware, ProbeService), so Express never sets their route.
  const fast = ahead.pathOf(request.originalUrl, request.method);
  if (fast !== undefined) return fast;
  if (PROBE_PATHS.includes(request.path)) return request.path;
  if (request.path === CONSOLE_PATH || request.path.startsWith(`${CONSOLE_PATH}/`)) return CONSOLE_PATH;
  return 'unmatched';
}
