import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiErrorResponse } from '../common/api-errors.decorator';
import { RateLimits } from '../config/app-config';

export type RouteClass = keyof RateLimits;

export const ROUTE_CLASS = 'leasehold:route-class';

export const TOO_MANY_REQUESTS = 'too many requests';
/** The limits are per second: a fixed window of this long per tenant and route class. */
export const RATE_WINDOW_MS = 1_000;

/** The counter of one tenant's requests of one class; names cannot hold a newline. */
export function rateKey(tenantId: string, routeClass: RouteClass | undefined): string {
  return `${tenantId}\n${routeClass}`;
}

export const RateLimited = (routeClass: RouteClass, alsoRefused?: { when: string; error?: string }) =>
  applyDecorators(
    SetMetadata(ROUTE_CLASS, routeClass),
    ApiErrorResponse(
      429,
      `The tenant used up RATE_LIMIT_${routeClass.toUpperCase()} requests per second (across all brokers) ` +
        `(0 means no limit${routeClass === 'renew' ? ', the default for renewals' : ''})` +
        `${alsoRefused ? `; or ${alsoRefused.when}` : ''}. Retry-After says when to try again.`,
      TOO_MANY_REQUESTS,
      ...(alsoRefused?.error ? [alsoRefused.error] : []),
    ),
  );
