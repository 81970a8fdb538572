import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { compositeKey, splitCompositeKey } from '../common/composite-key';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { WakeupRepository } from './wakeup.repository';
import { ParkedPolls, QueueWork } from './parked-polls';
import { errorMessage } from '../common/error-message';
import { MinHeap } from '../common/min-heap';

export const EXPIRY_SWEEP_MS = 500;
/** A sweep plans wakeups for leases ending this far ahead, so consecutive sweeps overlap. */
const SWEEP_LOOKAHEAD_MS = 3 * EXPIRY_SWEEP_MS;
const SWEEP_MAX_LEASES = 5_000;
/** Past it a lease's end is left to the sweep. */
const MAX_PLANNED = 10_000;
/** Replaced entries left in the heap past this are dropped by rebuilding it from the plans. */
const HEAP_REBUILD_AT = 4 * MAX_PLANNED;
/** Past the lease's end as this process measures it, so the claim finds it ended. */
const AFTER_END_MS = 5;

interface Planned {
  at: number;
  messages: number;
}

/**
 * Wakes parked polls when a lease of their group ends, so a crashed worker's batch goes to a waiting consumer at once,
 * not at its timeout. The sweep sees other processes' leases and is the safety net. A claim does not NOTIFY its
 * lease's end: that would be a NOTIFY per pop, and NOTIFY serialises committing transactions.
 */
@Injectable()
export class LeaseExpiryService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(LeaseExpiryService.name);
  /** Per (tenant, queue, consumer group, partition). */
  private readonly planned = new Map<string, Planned>();
  /** Planned ends by instant. */
  private readonly due = new MinHeap<{ key: string; at: number }>((entry) => entry.at);
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping = false;
  private stopped = false;
  private sweepFailing = false;

  constructor(
    private readonly polls: ParkedPolls,
    private readonly transactions: TransactionRunner,
    private readonly repository: WakeupRepository,
    drain: DrainService,
  ) {
    drain.onDrain(() => this.stop());
  }

  onApplicationBootstrap(): void {
    this.sweepTimer = setInterval(() => void this.sweep(), EXPIRY_SWEEP_MS).unref();
  }

  onApplicationShutdown(): void {
    this.stop();
  }

  leased(tenantId: string, queue: string, consumerGroup: string, partitions: QueueWork, leaseMs: number): void {
    if (this.stopped || !this.polls.isWaiting(tenantId, queue, consumerGroup)) return;
    const at = Date.now() + leaseMs + AFTER_END_MS;
    for (const [partition, messages] of partitions) {
      this.plan(compositeKey(tenantId, queue, consumerGroup, partition), at, messages);
    }
  }

  async sweep(): Promise<void> {
    const groups = this.polls.waitingGroups();
    if (this.stopped || this.sweeping || groups.length === 0) return;
    this.sweeping = true;
    try {
      const leases = await this.transactions.runOne(
        undefined,
        this.repository.endingLeases(groups, SWEEP_LOOKAHEAD_MS, SWEEP_MAX_LEASES),
      );
      const now = Date.now();
      for (const lease of leases) {
        const key = compositeKey(lease.tenantId, lease.queue, lease.consumerGroup, lease.partition);
        this.plan(key, now + lease.dueInMs + (lease.dueInMs > 0 ? AFTER_END_MS : 0), lease.messages);
      }
      if (this.sweepFailing) this.logger.log('Lease expiry sweep works again');
      this.sweepFailing = false;
    } catch (error) {
      // Parked polls still answer at their timeout; say so once, not every 500 ms.
      if (!this.sweepFailing && !this.stopped) {
        this.logger.warn(`Lease expiry sweep failed (${errorMessage(error)}); retrying`);
      }
      this.sweepFailing = true;
    } finally {
      this.sweeping = false;
    }
  }

  private plan(key: string, at: number, messages: number): void {
    if (at <= Date.now()) {
      this.planned.delete(key);
      this.fire(key, messages);
      return;
    }
    if (!this.planned.has(key) && this.planned.size >= MAX_PLANNED) return;
    const known = this.planned.get(key);
    this.planned.set(key, { at, messages });
    if (known?.at !== at) this.order(key, at);
    if (at < this.timerAt) this.arm(at);
  }

  /** Into the heap; an entry a later plan replaced stays until it comes up, and is passed over then. */
  private order(key: string, at: number): void {
    if (this.due.size >= HEAP_REBUILD_AT) {
      this.due.replace([...this.planned].map(([plannedKey, planned]) => ({ key: plannedKey, at: planned.at })));
      return;
    }
    this.due.push({ key, at });
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.fireDue(), Math.max(0, at - Date.now())).unref();
  }

  /** Takes the due entries off the top of the heap: a timer costs the leases ending, not all those planned. */
  private fireDue(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    for (let first = this.due.peek(); first && first.at <= now; first = this.due.peek()) {
      const { key, at } = this.due.pop()!;
      const planned = this.planned.get(key);
      if (planned?.at !== at) continue;
      this.planned.delete(key);
      this.fire(key, planned.messages);
    }
    const next = this.due.peek();
    if (next && !this.stopped) this.arm(next.at);
  }

  private fire(key: string, messages: number): void {
    const [tenantId, queue, consumerGroup, partition] = splitCompositeKey(key);
    this.polls.redelivered(tenantId, [{ queue, consumerGroup, partitions: new Map([[partition, messages]]) }]);
  }

  private stop(): void {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    clearTimeout(this.timer);
    this.planned.clear();
    this.due.clear();
  }
}
