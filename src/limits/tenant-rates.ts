import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import { BrokerRegistry } from '../cluster/broker-registry';
import { RetryLaterException } from '../common/retry-later.exception';
import { APP_CONFIG, AppConfig, RateLimits } from '../config/app-config';
import { FixedWindowThrottlerStorage } from './fixed-window.storage';
import { RATE_WINDOW_MS, rateKey, RouteClass, TOO_MANY_REQUESTS } from './route-class.decorator';

/**
 * Counts what a request carries beyond itself against the tenant's rate limits, once its body is read: the same
 * counters as TenantThrottlerGuard, which counted the request when it arrived.
 */
@Injectable()
export class TenantRates {
  private readonly rateLimits: RateLimits;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly storage: FixedWindowThrottlerStorage,
    private readonly brokers: BrokerRegistry,
  ) {
    this.rateLimits = config.limits.rateLimits;
  }

  /** All or nothing: past the limit nothing is counted and the answer is 429 with Retry-After. */
  charge(tenantId: string, routeClass: RouteClass, hits: number): void {
    const limit = this.rateLimits[routeClass];
    if (limit === 0 || hits <= 0) return;
    const key = rateKey(tenantId, routeClass);
    const { taken, secondsLeft } = this.storage.take(key, RATE_WINDOW_MS, this.brokers.share(limit), hits);
    if (!taken) throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_REQUESTS, secondsLeft);
  }
}
