import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiErrorResponse } from '../common/api-errors.decorator';
import { RateLimits } from '../config/app-config';

/** The rate-limit class of a route: each has its own per-tenant budget (RATE_LIMIT_*). */
export type RouteClass = keyof RateLimits;

export const ROUTE_CLASS = 'leasehold:route-class';

/** The body of the rate limiter's 429 (TenantThrottlerGuard). */
export const TOO_MANY_REQUESTS = 'too many requests';

/**
 * Puts a route (or every route of a controller) in a rate-limit class, and
 * documents the 429 that comes with it. `alsoRefused` is the route's own 429,
 * if it has one.
 */
export const RateLimited = (routeClass: RouteClass, alsoRefused?: { when: string; error: string }) =>
  applyDecorators(
    SetMetadata(ROUTE_CLASS, routeClass),
    ApiErrorResponse(
      429,
      `The tenant used up RATE_LIMIT_${routeClass.toUpperCase()} requests per second (across all brokers) ` +
        `(0 means no limit${routeClass === 'renew' ? ', the default for renewals' : ''})` +
        `${alsoRefused ? `; or ${alsoRefused.when}` : ''}. Retry-After says when to try again.`,
      TOO_MANY_REQUESTS,
      ...(alsoRefused ? [alsoRefused.error] : []),
    ),
  );
