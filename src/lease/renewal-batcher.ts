import { Inject, Injectable, Optional } from '@nestjs/common';
import { PoolUnavailableError } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { monotonicNow, requestBoundMs } from '../database/deadline';
import { MetricsService } from '../metrics/metrics.service';
import { LeaseRenewal, LeaseRepository, RenewalFailedError, RenewalRequest } from './lease.repository';

interface Pending {
  request: RenewalRequest;
  /** monotonicNow() by which this request is answered, whatever happens. */
  deadline: number;
  resolve: (renewal: LeaseRenewal) => void;
  reject: (error: unknown) => void;
}

const KNOWN_LEASES = 100_000;
const SMALL_LEASE_ROWS = 16;

type Lane = 'small' | 'big';

/** Group commit: renewals arriving while every slot is busy run together in the next. See docs/internals.md. */
@Injectable()
export class RenewalBatcher {
  private readonly waiting = new Map<string, Pending[]>();
  private waitingCount = 0;
  /** Rows each known lease renewed last time, by `tenant\nlease`. */
  private readonly leaseRows = new Map<string, number>();
  /** Leases in a statement now, by `tenant\nlease`: a second statement would only wait for the first's row locks. */
  private readonly leasesInFlight = new Map<string, number>();
  private running = 0;
  private runningBig = 0;
  private lastLane: Lane = 'small';
  private readonly maxInFlight: number;
  private readonly maxBatch: number;
  private readonly maxRows: number;
  private readonly boundMs: number;

  constructor(
    private readonly leases: LeaseRepository,
    @Inject(APP_CONFIG) config: AppConfig,
    @Optional() private readonly metrics?: MetricsService,
  ) {
    // More statements in flight than pooled connections would only queue in the pool.
    this.maxInFlight = Math.min(config.leaseRenewalConcurrency, config.database.poolSize);
    this.maxBatch = config.leaseRenewalBatchSize;
    this.maxRows = config.leaseRenewalBatchRows;
    this.boundMs = requestBoundMs(config.database);
  }

  renew(request: RenewalRequest): Promise<LeaseRenewal> {
    return new Promise<LeaseRenewal>((resolve, reject) => {
      const queue = this.waiting.get(request.tenantId);
      const pending = { request, deadline: monotonicNow() + this.boundMs, resolve, reject };
      if (queue) queue.push(pending);
      else this.waiting.set(request.tenantId, [pending]);
      this.waitingCount += 1;
      this.drain();
    });
  }

  private drain(): void {
    // With one slot only, big statements may take it; otherwise one slot stays for small ones.
    const bigSlots = Math.max(1, this.maxInFlight - 1);
    while (this.running < this.maxInFlight && this.waitingCount > 0) {
      const big = this.runningBig < bigSlots && this.hasHead('big');
      const small = this.hasHead('small');
      const lane: Lane | undefined =
        big && small ? (this.lastLane === 'big' ? 'small' : 'big') : big ? 'big' : small ? 'small' : undefined;
      if (!lane) return;
      this.lastLane = lane;
      const { batch, dropped } = this.takeBatch(lane);
      if (batch.length === 0) {
        if (dropped > 0) continue;
        return;
      }
      this.running += 1;
      if (lane === 'big') this.runningBig += 1;
      void this.run(batch, lane);
    }
  }

  private hasHead(lane: Lane): boolean {
    for (const queue of this.waiting.values()) if (this.laneOf(queue[0].request) === lane) return true;
    return false;
  }

  private laneOf(request: RenewalRequest): Lane {
    return this.rowsOf(request) > SMALL_LEASE_ROWS ? 'big' : 'small';
  }

  /** A lease in a running statement waits: in parallel it would hold a slot and its group behind those row locks. */
  private takeBatch(lane: Lane): { batch: Pending[]; dropped: number } {
    const now = monotonicNow();
    const batch: Pending[] = [];
    let rows = 0;
    let dropped = 0;
    while (batch.length < this.maxBatch && this.waitingCount > 0) {
      let tookAny = false;
      for (const [tenantId, queue] of [...this.waiting]) {
        if (batch.length >= this.maxBatch) break;
        const pending = queue[0];
        const size = this.rowsOf(pending.request);
        if (pending.deadline > now && this.laneOf(pending.request) !== lane) continue;
        if (pending.deadline > now && batch.length > 0 && rows + size > this.maxRows) continue;
        if (pending.deadline > now && this.leasesInFlight.has(leaseKey(pending.request))) continue;
        queue.shift();
        this.waitingCount -= 1;
        // Back of the round-robin: the map keeps insertion order.
        this.waiting.delete(tenantId);
        if (queue.length > 0) this.waiting.set(tenantId, queue);
        if (pending.deadline <= now) {
          pending.reject(new PoolUnavailableError(new Error('no renewal slot before the deadline')));
          dropped += 1;
          continue;
        }
        batch.push(pending);
        rows += size;
        tookAny = true;
      }
      if (!tookAny) break;
    }
    return { batch, dropped };
  }

  private async run(batch: Pending[], lane: Lane): Promise<void> {
    const leases = batch.map((pending) => leaseKey(pending.request));
    for (const lease of leases) this.leasesInFlight.set(lease, (this.leasesInFlight.get(lease) ?? 0) + 1);
    try {
      await this.renewOrSplit(batch);
    } finally {
      for (const lease of leases) {
        const left = this.leasesInFlight.get(lease)! - 1;
        if (left === 0) this.leasesInFlight.delete(lease);
        else this.leasesInFlight.set(lease, left);
      }
      this.running -= 1;
      if (lane === 'big') this.runningBig -= 1;
      this.drain();
    }
  }

  private async renewOrSplit(batch: Pending[]): Promise<void> {
    let renewals: LeaseRenewal[];
    try {
      // First in, first out per tenant: the group's earliest deadline bounds its statement.
      const deadline = Math.min(...batch.map((pending) => pending.deadline));
      this.metrics?.renewalGroupSize.observe(batch.length);
      const timer = this.metrics?.renewalStatementSeconds.startTimer();
      try {
        renewals = await this.leases.renew(
          batch.map((pending) => ({ ...pending.request, expectedRows: this.rowsOf(pending.request) })),
          deadline,
        );
      } finally {
        timer?.();
      }
    } catch (error) {
      const parts = error instanceof RenewalFailedError ? split(batch) : [];
      if (parts.length === 0) {
        for (const pending of batch) pending.reject(error);
        return;
      }
      for (const part of parts) await this.renewOrSplit(part);
      return;
    }
    batch.forEach((pending, index) => {
      // A renewal that skipped busy rows undercounts the lease.
      if (!renewals[index].busy) this.remember(pending.request, renewals[index].renewed);
      pending.resolve(renewals[index]);
    });
  }

  private rowsOf(request: RenewalRequest): number {
    return this.leaseRows.get(leaseKey(request)) ?? 1;
  }

  private remember(request: RenewalRequest, rows: number): void {
    const key = leaseKey(request);
    this.leaseRows.delete(key);
    if (rows <= 1) return;
    this.leaseRows.set(key, rows);
    if (this.leaseRows.size > KNOWN_LEASES) this.leaseRows.delete(this.leaseRows.keys().next().value!);
  }
}

function split(batch: Pending[]): Pending[][] {
  if (batch.length <= 1) return [];
  const byTenant = new Map<string, Pending[]>();
  for (const pending of batch) {
    const group = byTenant.get(pending.request.tenantId) ?? [];
    group.push(pending);
    byTenant.set(pending.request.tenantId, group);
  }
  return byTenant.size > 1 ? [...byTenant.values()] : batch.map((pending) => [pending]);
}

function leaseKey(request: RenewalRequest): string {
  return `${request.tenantId}\n${request.leaseId}`;
}
