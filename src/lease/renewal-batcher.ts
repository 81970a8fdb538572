import { Inject, Injectable } from '@nestjs/common';
import { PoolUnavailableError } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { monotonicNow, requestBoundMs } from '../database/deadline';
import { LeaseRenewal, LeaseRepository, RenewalRequest } from './lease.repository';

interface Pending {
  request: RenewalRequest;
  /** monotonicNow() by which this request is answered, whatever happens. */
  deadline: number;
  resolve: (renewal: LeaseRenewal) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for renewals. A request that finds a free slot runs at once,
 * so a lone caller waits for nothing but its own statement. Requests that
 * arrive while every slot is busy wait for the next free slot and then run
 * together as one statement, up to `maxBatch` at a time: under load, one
 * commit serves many renewals instead of one each.
 *
 * Each request keeps the bound it was promised from the moment it arrived
 * (acquire timeout plus statement budget): time spent waiting for a slot
 * comes out of it, and a group runs against the earliest deadline among its
 * requests.
 */
@Injectable()
export class RenewalBatcher {
  private readonly queue: Pending[] = [];
  private running = 0;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;
  private readonly boundMs: number;

  constructor(
    private readonly leases: LeaseRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    // More statements in flight than pooled connections would only queue in the pool.
    this.maxInFlight = Math.min(config.leaseRenewalConcurrency, config.database.poolSize);
    this.maxBatch = config.leaseRenewalBatchSize;
    this.boundMs = requestBoundMs(config.database);
  }

  renew(request: RenewalRequest): Promise<LeaseRenewal> {
    return new Promise<LeaseRenewal>((resolve, reject) => {
      this.queue.push({ request, deadline: monotonicNow() + this.boundMs, resolve, reject });
      this.drain();
    });
  }

  private drain(): void {
    while (this.running < this.maxInFlight && this.queue.length > 0) {
      const batch = this.takeBatch();
      if (batch.length === 0) continue;
      this.running += 1;
      void this.run(batch);
    }
  }

  /** The next group, without the requests whose time ran out while they waited for a slot. */
  private takeBatch(): Pending[] {
    const now = monotonicNow();
    const batch: Pending[] = [];
    while (batch.length < this.maxBatch && this.queue.length > 0) {
      const pending = this.queue.shift()!;
      if (pending.deadline > now) {
        batch.push(pending);
      } else {
        pending.reject(new PoolUnavailableError(new Error('no renewal slot before the deadline')));
      }
    }
    return batch;
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      // First in, first out: the first request's deadline is the group's earliest.
      const renewals = await this.leases.renew(
        batch.map((pending) => pending.request),
        batch[0].deadline,
      );
      batch.forEach((pending, index) => pending.resolve(renewals[index]));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.running -= 1;
      this.drain();
    }
  }
}
