import { Inject, Injectable } from '@nestjs/common';
import { BrokerRegistry } from '../cluster/broker-registry';
import { compositeKey, splitCompositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DrainService } from '../lifecycle/drain.service';

export type WaitOutcome = 'woken' | 'timeout' | 'aborted' | 'closing';

/** What a write made claimable in one queue: messages per partition name. */
export type QueueWork = Map<string, number>;

export interface Redelivery {
  queue: string;
  consumerGroup: string;
  partitions: QueueWork;
}

/**
 * One long poll, from its first look to its answer: it counts once towards its tenant's POP_MAX_WAITING_PER_TENANT
 * and the parked-polls gauge, however many queues it listens on (a discovery poll listens on several, or none yet).
 */
export class LongPoll {
  private ended = false;

  constructor(
    readonly tenantId: string,
    /** Its tenant already had POP_MAX_WAITING_PER_TENANT polls: it is not counted and must not wait. */
    readonly refused: boolean,
    private readonly release: () => void,
  ) {}

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.refused) this.release();
  }
}

/** Interest in one queue, registered before looking for messages so a push committed meanwhile is not missed. */
export class WakeupSubscription {
  private outcome: WaitOutcome | undefined;
  private resolve: ((outcome: WaitOutcome) => void) | undefined;

  constructor(
    readonly tenantId: string,
    readonly consumerGroup: string,
    /** Only this partition's messages are claimable for it; undefined: any partition's. */
    readonly partition: string | undefined,
    private readonly detach: (subscription: WakeupSubscription) => void,
  ) {}

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  get parked(): boolean {
    return this.resolve !== undefined && this.outcome === undefined;
  }

  settle(outcome: WaitOutcome): void {
    if (this.outcome) return;
    this.outcome = outcome;
    this.resolve?.(outcome);
  }

  wait(timeoutMs: number, signal: AbortSignal): Promise<WaitOutcome> {
    if (signal.aborted) this.settle('aborted');
    if (this.outcome) return Promise.resolve(this.outcome);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.settle('timeout'), timeoutMs);
      const onAbort = (): void => this.settle('aborted');
      signal.addEventListener('abort', onAbort, { once: true });
      this.resolve = (outcome) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
    });
  }

  close(): void {
    this.detach(this);
  }
}

/** A push wakes only as many waiters per group as it brought messages, not every parked poll. */
@Injectable()
export class ParkedPolls {
  /** Per (tenant, queue), in the order they parked. */
  private readonly waiters = new Map<string, Set<WakeupSubscription>>();
  /** Long polls in progress, parked or looking. */
  private readonly pollsPerTenant = new Map<string, number>();
  private readonly parkedPerGroup = new Map<string, number>();
  private readonly maxParkedPerTenant: number;
  private closing = false;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    drain: DrainService,
    private readonly brokers: BrokerRegistry,
  ) {
    this.maxParkedPerTenant = config.limits.popMaxWaitingPerTenant;
    drain.onDrain(() => this.closeAll());
  }

  /** Counted until end(); a refused one is not counted. */
  begin(tenantId: string): LongPoll {
    const polls = this.pollsPerTenant.get(tenantId) ?? 0;
    // Polls parked before a broker joined stay parked; only new ones meet the smaller share.
    const refused = !this.closing && polls >= this.brokers.share(this.maxParkedPerTenant);
    if (!refused) this.pollsPerTenant.set(tenantId, polls + 1);
    return new LongPoll(tenantId, refused, () => decrement(this.pollsPerTenant, tenantId));
  }

  subscribe(poll: LongPoll, queue: string, consumerGroup: string, partition: string | undefined): WakeupSubscription {
    const { tenantId } = poll;
    const key = compositeKey(tenantId, queue);
    const subscription = new WakeupSubscription(tenantId, consumerGroup, partition, (done) => this.detach(key, done));
    if (this.closing) {
      subscription.settle('closing');
      return subscription;
    }
    let set = this.waiters.get(key);
    if (!set) {
      set = new Set();
      this.waiters.set(key, set);
    }
    set.add(subscription);
    const groupKey = compositeKey(tenantId, queue, consumerGroup);
    this.parkedPerGroup.set(groupKey, (this.parkedPerGroup.get(groupKey) ?? 0) + 1);
    return subscription;
  }

  /** Parked polls answer 503 at once, so their clients retry elsewhere instead of polling this broker again. */
  closeAll(): void {
    this.closing = true;
    for (const subscriptions of this.waiters.values()) {
      for (const subscription of subscriptions) subscription.settle('closing');
    }
    this.waiters.clear();
    this.pollsPerTenant.clear();
    this.parkedPerGroup.clear();
  }

  get total(): number {
    let total = 0;
    for (const count of this.pollsPerTenant.values()) total += count;
    return total;
  }

  isWaiting(tenantId: string, queue: string, consumerGroup: string): boolean {
    return this.parkedPerGroup.has(compositeKey(tenantId, queue, consumerGroup));
  }

  parkedCount(tenantId: string, queue: string, consumerGroup: string): number {
    let parked = 0;
    for (const subscription of this.waiters.get(compositeKey(tenantId, queue)) ?? []) {
      if (subscription.consumerGroup === consumerGroup && subscription.parked) parked += 1;
    }
    return parked;
  }

  waitingGroups(): Array<{ tenantId: string; queue: string; consumerGroup: string }> {
    return [...this.parkedPerGroup.keys()].map((key) => {
      const [tenantId, queue, consumerGroup] = splitCompositeKey(key);
      return { tenantId, queue, consumerGroup };
    });
  }

  pushed(tenantId: string, work: Map<string, QueueWork>): void {
    for (const [queue, partitions] of work) this.wake(tenantId, queue, partitions);
  }

  redelivered(tenantId: string, redeliveries: Redelivery[]): void {
    for (const { queue, consumerGroup, partitions } of redeliveries) {
      this.wake(tenantId, queue, partitions, sumOf(partitions), consumerGroup);
    }
  }

  /** `partitions` undefined: the sender did not say which. */
  wake(
    tenantId: string,
    queue: string,
    partitions: QueueWork | undefined,
    total = sumOf(partitions),
    consumerGroup?: string,
  ): void {
    const key = compositeKey(tenantId, queue);
    const set = this.waiters.get(key);
    if (!set) return;
    const left = new Map<string, { total: number; partitions: Map<string, number> | undefined }>();
    for (const subscription of set) {
      if (consumerGroup !== undefined && subscription.consumerGroup !== consumerGroup) continue;
      let budget = left.get(subscription.consumerGroup);
      if (!budget) {
        budget = { total, partitions: partitions && new Map(partitions) };
        left.set(subscription.consumerGroup, budget);
      }
      if (budget.total <= 0 || subscription.settled) continue;
      if (subscription.partition !== undefined && budget.partitions) {
        const forPartition = budget.partitions.get(subscription.partition) ?? 0;
        if (forPartition <= 0) continue;
        budget.partitions.set(subscription.partition, forPartition - 1);
      }
      budget.total -= 1;
      subscription.settle('woken');
      this.detach(key, subscription);
    }
  }

  wakeAll(): void {
    for (const [key, set] of [...this.waiters]) {
      const [tenantId, queue] = splitCompositeKey(key);
      this.wake(tenantId, queue, undefined, set.size);
    }
  }

  private detach(key: string, subscription: WakeupSubscription): void {
    const set = this.waiters.get(key);
    if (!set?.delete(subscription)) return;
    if (set.size === 0) this.waiters.delete(key);
    decrement(this.parkedPerGroup, compositeKey(key, subscription.consumerGroup));
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

export function sumOf(partitions: QueueWork | undefined): number {
  let total = 0;
  for (const count of partitions?.values() ?? []) total += count;
  return total;
}
