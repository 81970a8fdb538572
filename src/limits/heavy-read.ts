import {
  applyDecorators,
  CallHandler,
  ExecutionContext,
  HttpStatus,
  Inject,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { Observable, finalize } from 'rxjs';
import { principalOf, tenantIdOf } from '../auth/principal.decorator';
import { ApiErrorResponse } from '../common/api-errors.decorator';
import { RetryLaterException } from '../common/retry-later.exception';
import { KeyedPermits } from '../common/semaphore';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TOO_MANY_REQUESTS } from './route-class.decorator';

export const TOO_MANY_HEAVY_READS = 'too many listings in progress';

/** The tenants' permits, one set for the process whichever module's controller takes one. */
@Injectable()
export class HeavyReadPermits {
  readonly permits: KeyedPermits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.permits = new KeyedPermits(config.limits.tenantMaxHeavyReads);
  }
}

/** Refuses at once rather than queueing: a queued listing would still hold the caller's connection and the answer. */
@Injectable()
export class HeavyReadInterceptor implements NestInterceptor {
  constructor(private readonly heavyReads: HeavyReadPermits) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request: object = context.switchToHttp().getRequest();
    if (principalOf(request) === undefined) return next.handle();
    const release = this.heavyReads.permits.tryAcquire(tenantIdOf(request));
    if (!release) throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_HEAVY_READS, 1);
    try {
      return next.handle().pipe(finalize(release));
    } catch (error) {
      release();
      throw error;
    }
  }
}

/**
 * A read whose work grows with what the tenant stores (listings, browsing): a tenant runs at most
 * TENANT_MAX_HEAVY_READS of them at once in this process, so its dashboards cannot hold the pool that its own pushes,
 * pops and acks, and every other tenant, need. On the route, not global: a global interceptor would turn off the fast
 * path of push, pop, ack, extend and transactions, which runs no interceptor.
 */
export const HeavyRead = () =>
  applyDecorators(
    UseInterceptors(HeavyReadInterceptor),
    ApiErrorResponse(
      429,
      'The tenant used up RATE_LIMIT_MANAGE requests per second (across all brokers); or it already has ' +
        'TENANT_MAX_HEAVY_READS listings in progress on this broker (default 4). Retry-After says when to try again.',
      TOO_MANY_REQUESTS,
      TOO_MANY_HEAVY_READS,
    ),
  );
