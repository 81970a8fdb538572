import { ExecutionContext, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  ThrottlerLimitDetail,
  ThrottlerModuleOptions,
  ThrottlerStorage,
} from '@nestjs/throttler';
import { principalOf, tenantIdOf } from '../auth/principal.decorator';
import { RetryLaterException } from '../common/retry-later.exception';
import { APP_CONFIG, AppConfig, RateLimits } from '../config/app-config';
import { ROUTE_CLASS, RouteClass, TOO_MANY_REQUESTS } from './route-class.decorator';

/**
 * Per-tenant request rates, per route class (RATE_LIMIT_RENEW, _CONSUME,
 * _PRODUCE, _MANAGE, each per second for the whole deployment; this process
 * counts its share, see AuthModule and BrokerRegistry), with
 * @nestjs/throttler. Runs after AccessGuard, which resolved the tenant; a
 * route without a class, or whose class is unlimited (0), is not counted.
 * Over the limit: 429 {"error":"too many requests"} with Retry-After.
 */
@Injectable()
export class TenantThrottlerGuard extends ThrottlerGuard {
  private readonly rateLimits: RateLimits;

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() storage: ThrottlerStorage,
    reflector: Reflector,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    super(options, storage, reflector);
    this.rateLimits = config.limits.rateLimits;
  }

  /** The route's class and its per-second limit, or undefined when the route is not limited. */
  static limitOf(reflector: Reflector, rateLimits: RateLimits, context: ExecutionContext): number | undefined {
    const routeClass = reflector.getAllAndOverride<RouteClass | undefined>(ROUTE_CLASS, [
      context.getHandler(),
      context.getClass(),
    ]);
    const limit = routeClass === undefined ? 0 : rateLimits[routeClass];
    return limit > 0 ? limit : undefined;
  }

  /** Public routes have no tenant to count against. */
  protected override shouldSkip(context: ExecutionContext): Promise<boolean> {
    const limit = TenantThrottlerGuard.limitOf(this.reflector, this.rateLimits, context);
    return Promise.resolve(limit === undefined || principalOf(context.switchToHttp().getRequest()) === undefined);
  }

  protected override getTracker(request: Record<string, unknown>): Promise<string> {
    return Promise.resolve(tenantIdOf(request));
  }

  protected override generateKey(context: ExecutionContext, tenantId: string): string {
    const routeClass = this.reflector.getAllAndOverride<RouteClass>(ROUTE_CLASS, [
      context.getHandler(),
      context.getClass(),
    ]);
    return `${tenantId}\n${routeClass}`;
  }

  protected override throwThrottlingException(_context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    throw new RetryLaterException(
      HttpStatus.TOO_MANY_REQUESTS,
      TOO_MANY_REQUESTS,
      Math.max(1, detail.timeToBlockExpire),
    );
  }
}
