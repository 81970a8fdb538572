import { ExecutionContext, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  ThrottlerLimitDetail,
  ThrottlerModuleOptions,
  ThrottlerOptions,
  ThrottlerStorage,
} from '@nestjs/throttler';
import { principalOf, tenantIdOf } from '../auth/principal.decorator';
import { RetryLaterException } from '../common/retry-later.exception';
import { APP_CONFIG, AppConfig, RateLimits } from '../config/app-config';
import { rateKey, ROUTE_CLASS, RouteClass, TOO_MANY_REQUESTS } from './route-class.decorator';

/** Counts this process's share of deployment-wide limits (BrokerRegistry), after AccessGuard resolved the tenant. */
@Injectable()
export class TenantThrottlerGuard extends ThrottlerGuard {
  private readonly rateLimits: RateLimits;
  private readonly routeClasses = new WeakMap<object, RouteClass | undefined>();

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() storage: ThrottlerStorage,
    reflector: Reflector,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    super(options, storage, reflector);
    this.rateLimits = config.limits.rateLimits;
  }

  static limitOf(reflector: Reflector, rateLimits: RateLimits, context: ExecutionContext): number | undefined {
    const routeClass = reflector.getAllAndOverride<RouteClass | undefined>(ROUTE_CLASS, [
      context.getHandler(),
      context.getClass(),
    ]);
    const limit = routeClass === undefined ? 0 : rateLimits[routeClass];
    return limit > 0 ? limit : undefined;
  }

  /** Skips eight metadata lookups and as many promises per request, the most any piece of a renewal allocated. */
  override async canActivate(context: ExecutionContext): Promise<boolean> {
    if (this.throttlers.length !== 1) return super.canActivate(context);
    if (await this.shouldSkip(context)) return true;
    const [throttler] = this.throttlers;
    const limit = await resolved(throttler.limit, context);
    const ttl = await resolved(throttler.ttl, context);
    const tenantId = await this.getTracker(context.switchToHttp().getRequest());
    const key = this.generateKey(context, tenantId);
    const record = await this.storageService.increment(key, ttl, limit, ttl, throttler.name ?? 'default');
    if (record.isBlocked)
      await this.throwThrottlingException(context, { ...record, limit, ttl, key, tracker: tenantId });
    return true;
  }

  private routeClassOf(context: ExecutionContext): RouteClass | undefined {
    const handler = context.getHandler();
    if (!this.routeClasses.has(handler)) {
      this.routeClasses.set(
        handler,
        this.reflector.getAllAndOverride<RouteClass | undefined>(ROUTE_CLASS, [handler, context.getClass()]),
      );
    }
    return this.routeClasses.get(handler);
  }

  /** Public routes, and routes whose class is unlimited, have nothing to count. */
  protected override shouldSkip(context: ExecutionContext): Promise<boolean> {
    const routeClass = this.routeClassOf(context);
    const limited = routeClass !== undefined && this.rateLimits[routeClass] > 0;
    return Promise.resolve(!limited || principalOf(context.switchToHttp().getRequest()) === undefined);
  }

  protected override getTracker(request: Record<string, unknown>): Promise<string> {
    return Promise.resolve(tenantIdOf(request));
  }

  protected override generateKey(context: ExecutionContext, tenantId: string): string {
    return rateKey(tenantId, this.routeClassOf(context));
  }

  protected override throwThrottlingException(_context: ExecutionContext, detail: ThrottlerLimitDetail): Promise<void> {
    throw new RetryLaterException(
      HttpStatus.TOO_MANY_REQUESTS,
      TOO_MANY_REQUESTS,
      Math.max(1, detail.timeToBlockExpire),
    );
  }
}

function resolved(value: ThrottlerOptions['limit'], context: ExecutionContext): Promise<number> | number {
  return typeof value === 'function' ? value(context) : value;
}
