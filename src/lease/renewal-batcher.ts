import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { LeaseRenewal, LeaseRepository, RenewalRequest } from './lease.repository';

interface Pending {
  request: RenewalRequest;
  resolve: (renewal: LeaseRenewal) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for renewals. A request that finds a free slot runs at once,
 * so a lone caller waits for nothing but its own statement. Requests that
 * arrive while every slot is busy wait for the next free slot and then run
 * together as one statement, up to `maxBatch` at a time: under load, one
 * commit serves many renewals instead of one each. The wait is bounded by
 * the duration of the statements already running.
 */
@Injectable()
export class RenewalBatcher {
  private readonly queue: Pending[] = [];
  private running = 0;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  constructor(
    private readonly leases: LeaseRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    // More statements in flight than pooled connections would only queue in the pool.
    this.maxInFlight = Math.min(config.leaseRenewalConcurrency, config.database.poolSize);
    this.maxBatch = config.leaseRenewalBatchSize;
  }

  renew(request: RenewalRequest): Promise<LeaseRenewal> {
    return new Promise<LeaseRenewal>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.drain();
    });
  }

  private drain(): void {
    while (this.running < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.running += 1;
      void this.run(batch);
    }
  }

  private async run(batch: Pending[]): Promise<void> {
    try {
      const renewals = await this.leases.renew(batch.map((pending) => pending.request));
      batch.forEach((pending, index) => pending.resolve(renewals[index]));
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.running -= 1;
      this.drain();
    }
  }
}
