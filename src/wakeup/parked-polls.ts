import { Inject, Injectable } from '@nestjs/common';
import { BrokerRegistry } from '../cluster/broker-registry';
import { compositeKey, splitCompositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DrainService } from '../lifecycle/drain.service';
import { HangUpSignal } from '../common/client-abort.decorator';
import { monotonicNow } from '../database/deadline';
import { MinHeap } from '../common/min-heap';

export type WaitOutcome = 'woken' | 'timeout' | 'aborted' | 'closing';

/** Told once how a wait ended. */
export interface Waiter {
  settled(outcome: WaitOutcome): void;
}

/** What a write made claimable in one queue: messages per partition name. */
export type QueueWork = Map<string, number>;

export interface Redelivery {
  queue: string;
  consumerGroup: string;
  partitions: QueueWork;
}

/** One cursor with messages a claim could take. */
export interface CursorWork {
  queue: string;
  consumerGroup: string;
  partition: string;
  messages: number;
}

/** A cursor with messages to claim, of any tenant: what work on no tenant's behalf wakes for (Writes.redelivered). */
export interface TenantCursorWork extends CursorWork {
  tenantId: string;
}

/** Cursors as wakeups: one per queue and consumer group. */
export function redeliveriesOf(cursors: Iterable<CursorWork>): Redelivery[] {
  const byGroup = new Map<string, Redelivery>();
  for (const { queue, consumerGroup, partition, messages } of cursors) {
    const key = compositeKey(queue, consumerGroup);
    let redelivery = byGroup.get(key);
    if (!redelivery) {
      redelivery = { queue, consumerGroup, partitions: new Map() };
      byGroup.set(key, redelivery);
    }
    redelivery.partitions.set(partition, messages);
  }
  return [...byGroup.values()];
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
    private readonly polls: ParkedPolls,
  ) {}

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.refused) this.polls.ended(this.tenantId);
  }
}

/**
 * Interest in one queue, registered before looking for messages so a push committed meanwhile is not missed. It is
 * its own list node, heap entry and abort listener: a parked poll holds this object and its waiter, nothing else
 * here (no timer, no closure).
 */
export class WakeupSubscription {
  /** Neighbours in its list, oldest first; the list while it is in one. */
  previous: WakeupSubscription | undefined = undefined;
  next: WakeupSubscription | undefined = undefined;
  list: WaiterList | undefined = undefined;
  /** Its place in the deadline heap, -1 outside it; the monotonic instant its wait times out. */
  heapIndex = -1;
  deadline = 0;
  private outcome: WaitOutcome | undefined = undefined;
  private waiter: Waiter | undefined = undefined;
  private signal: HangUpSignal | undefined = undefined;

  constructor(
    readonly tenantId: string,
    readonly consumerGroup: string,
    /** Only this partition's messages are claimable for it; undefined: any partition's. */
    readonly partition: string | undefined,
    private readonly polls: ParkedPolls,
  ) {}

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  get parked(): boolean {
    return this.waiter !== undefined && this.outcome === undefined;
  }

  /** Settled once; it leaves its list and the heap at once, so a wakeup never meets a settled one. */
  settle(outcome: WaitOutcome): void {
    if (this.outcome) return;
    this.outcome = outcome;
    this.polls.detach(this);
    this.polls.unschedule(this);
    this.signal?.removeEventListener('abort', this);
    this.signal = undefined;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.settled(outcome);
  }

  /** The client hung up. */
  handleEvent(): void {
    this.settle('aborted');
  }

  wait(timeoutMs: number, signal: HangUpSignal): Promise<WaitOutcome> {
    if (signal.aborted) this.settle('aborted');
    if (this.outcome) return Promise.resolve(this.outcome);
    return new Promise((resolve) => this.park(timeoutMs, signal, { settled: resolve }));
  }

  /** As wait, telling `waiter` instead of settling a promise: a parked poll then holds no promise either. */
  await(timeoutMs: number, signal: HangUpSignal, waiter: Waiter): void {
    if (signal.aborted) this.settle('aborted');
    const outcome = this.outcome;
    // Never from inside the caller's own call.
    if (outcome) queueMicrotask(() => waiter.settled(outcome));
    else this.park(timeoutMs, signal, waiter);
  }

  private park(timeoutMs: number, signal: HangUpSignal, waiter: Waiter): void {
    this.waiter = waiter;
    this.signal = signal;
    signal.addEventListener('abort', this);
    this.polls.schedule(this, timeoutMs);
  }

  close(): void {
    this.polls.detach(this);
  }
}

/** One group's subscriptions to one partition (or to any partition), oldest first, linked through themselves. */
class WaiterList {
  head: WakeupSubscription | undefined = undefined;
  tail: WakeupSubscription | undefined = undefined;

  constructor(
    readonly group: GroupWaiters,
    /** Undefined: the list of polls for any partition. */
    readonly partition: string | undefined,
  ) {}
}

/** Everything one consumer group of one queue waits on: wakeups go straight to the lists they concern. */
class GroupWaiters {
  readonly any: WaiterList = new WaiterList(this, undefined);
  readonly partitions = new Map<string, WaiterList>();
  /** Subscriptions listed, parked or looking. */
  size = 0;

  constructor(
    /** compositeKey(tenant, queue) */
    readonly queueKey: string,
    readonly consumerGroup: string,
  ) {}
}

/**
 * A push wakes only as many waiters per group as it brought messages, not every parked poll, and finds them through
 * (tenant, queue, group, partition) lists: waking costs the polls woken and the partitions named, not the polls
 * parked. Every timed wait is in one min-heap by deadline under one timer.
 */
@Injectable()
export class ParkedPolls {
  /** Per (tenant, queue), per consumer group. */
  private readonly waiters = new Map<string, Map<string, GroupWaiters>>();
  /** Long polls in progress, parked or looking. */
  private readonly pollsPerTenant = new Map<string, number>();
  private polls = 0;
  private readonly maxParkedPerTenant: number;
  private closing = false;
  private readonly deadlines = new MinHeap<WakeupSubscription>(
    (subscription) => subscription.deadline,
    (subscription, index) => (subscription.heapIndex = index),
  );
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private readonly onTimer = (): void => this.timedOut();

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
    if (!refused) {
      this.pollsPerTenant.set(tenantId, polls + 1);
      this.polls += 1;
    }
    return new LongPoll(tenantId, refused, this);
  }

  /** A counted LongPoll ended. */
  ended(tenantId: string): void {
    if (!this.pollsPerTenant.has(tenantId)) return;
    decrement(this.pollsPerTenant, tenantId);
    this.polls -= 1;
  }

  subscribe(poll: LongPoll, queue: string, consumerGroup: string, partition: string | undefined): WakeupSubscription {
    const { tenantId } = poll;
    const subscription = new WakeupSubscription(tenantId, consumerGroup, partition, this);
    if (this.closing) {
      subscription.settle('closing');
      return subscription;
    }
    const queueKey = compositeKey(tenantId, queue);
    let groups = this.waiters.get(queueKey);
    if (!groups) {
      groups = new Map();
      this.waiters.set(queueKey, groups);
    }
    let group = groups.get(consumerGroup);
    if (!group) {
      group = new GroupWaiters(queueKey, consumerGroup);
      groups.set(consumerGroup, group);
    }
    let list = group.any;
    if (partition !== undefined) {
      list = group.partitions.get(partition) ?? new WaiterList(group, partition);
      group.partitions.set(partition, list);
    }
    append(list, subscription);
    group.size += 1;
    return subscription;
  }

  /** Parked polls answer 503 at once, so their clients retry elsewhere instead of polling this broker again. */
  closeAll(): void {
    this.closing = true;
    for (const subscription of this.listed()) subscription.settle('closing');
    this.waiters.clear();
    this.pollsPerTenant.clear();
    this.polls = 0;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  get total(): number {
    return this.polls;
  }

  isWaiting(tenantId: string, queue: string, consumerGroup: string): boolean {
    return this.waiters.get(compositeKey(tenantId, queue))?.has(consumerGroup) ?? false;
  }

  /** Walks the group's polls: for tests and diagnostics, not for a request. */
  parkedCount(tenantId: string, queue: string, consumerGroup: string): number {
    const group = this.waiters.get(compositeKey(tenantId, queue))?.get(consumerGroup);
    let parked = 0;
    for (const list of group ? [group.any, ...group.partitions.values()] : []) {
      for (let at = list.head; at; at = at.next) if (at.parked) parked += 1;
    }
    return parked;
  }

  waitingGroups(): Array<{ tenantId: string; queue: string; consumerGroup: string }> {
    const groups: Array<{ tenantId: string; queue: string; consumerGroup: string }> = [];
    for (const [key, byGroup] of this.waiters) {
      const [tenantId, queue] = splitCompositeKey(key);
      for (const consumerGroup of byGroup.keys()) groups.push({ tenantId, queue, consumerGroup });
    }
    return groups;
  }

  pushed(tenantId: string, work: Map<string, QueueWork>): void {
    for (const [queue, partitions] of work) this.wake(tenantId, queue, partitions);
  }

  redelivered(tenantId: string, redeliveries: Redelivery[]): void {
    for (const { queue, consumerGroup, partitions } of redeliveries) {
      this.wake(tenantId, queue, partitions, sumOf(partitions), consumerGroup);
    }
  }

  /**
   * Per group, up to `total` polls: first those of each partition named (up to its count), then those for any
   * partition, oldest first; with no partitions named, polls of any partition and then of single partitions.
   */
  wake(
    tenantId: string,
    queue: string,
    partitions: QueueWork | undefined,
    total = sumOf(partitions),
    consumerGroup?: string,
  ): void {
    const groups = this.waiters.get(compositeKey(tenantId, queue));
    if (!groups) return;
    if (consumerGroup !== undefined) {
      const group = groups.get(consumerGroup);
      if (group) wakeGroup(group, partitions, total);
      return;
    }
    for (const group of [...groups.values()]) wakeGroup(group, partitions, total);
  }

  wakeAll(): void {
    for (const groups of [...this.waiters.values()]) {
      for (const group of [...groups.values()]) wakeGroup(group, undefined, group.size);
    }
  }

  /** Out of its list; a list, group or queue left empty goes. */
  detach(subscription: WakeupSubscription): void {
    const list = subscription.list;
    if (!list) return;
    const { previous, next } = subscription;
    if (previous) previous.next = next;
    else list.head = next;
    if (next) next.previous = previous;
    else list.tail = previous;
    subscription.previous = subscription.next = subscription.list = undefined;
    const group = list.group;
    group.size -= 1;
    if (!list.head && list.partition !== undefined) group.partitions.delete(list.partition);
    if (group.size > 0) return;
    const groups = this.waiters.get(group.queueKey);
    if (groups?.get(group.consumerGroup) !== group) return;
    groups.delete(group.consumerGroup);
    if (groups.size === 0) this.waiters.delete(group.queueKey);
  }

  /** Into the deadline heap; the one timer moves only when this wait ends before every other. */
  schedule(subscription: WakeupSubscription, timeoutMs: number): void {
    subscription.deadline = monotonicNow() + Math.max(0, timeoutMs);
    this.deadlines.push(subscription);
    if (subscription.deadline < this.timerAt) this.arm(subscription.deadline);
  }

  unschedule(subscription: WakeupSubscription): void {
    if (subscription.heapIndex < 0) return;
    this.deadlines.remove(subscription.heapIndex);
    subscription.heapIndex = -1;
    // The timer is left as it is: when it fires early, it sets itself for the next deadline.
  }

  /** Waits timed, for tests. */
  get scheduled(): number {
    return this.deadlines.size;
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(at - monotonicNow()))).unref();
  }

  private timedOut(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = monotonicNow();
    for (let first = this.deadlines.peek(); first && first.deadline <= now; first = this.deadlines.peek()) {
      first.settle('timeout');
    }
    const next = this.deadlines.peek();
    if (next) this.arm(next.deadline);
  }

  private *listed(): Generator<WakeupSubscription> {
    const all: WakeupSubscription[] = [];
    for (const groups of this.waiters.values()) {
      for (const group of groups.values()) {
        for (const list of [group.any, ...group.partitions.values()]) {
          for (let at = list.head; at; at = at.next) all.push(at);
        }
      }
    }
    yield* all;
  }
}

function append(list: WaiterList, subscription: WakeupSubscription): void {
  subscription.list = list;
  subscription.previous = list.tail;
  if (list.tail) list.tail.next = subscription;
  else list.head = subscription;
  list.tail = subscription;
}

function wakeGroup(group: GroupWaiters, partitions: QueueWork | undefined, total: number): void {
  let left = total;
  if (partitions) {
    for (const [partition, count] of partitions) {
      if (left <= 0) return;
      const list = group.partitions.get(partition);
      if (list) left -= wakeOldest(list, Math.min(count, left));
    }
  }
  left -= wakeOldest(group.any, left);
  if (partitions) return;
  for (const list of [...group.partitions.values()]) {
    if (left <= 0) return;
    left -= wakeOldest(list, left);
  }
}

/** Listed subscriptions are never settled: settling takes one out of its list. */
function wakeOldest(list: WaiterList, count: number): number {
  let woken = 0;
  while (woken < count && list.head) {
    list.head.settle('woken');
    woken += 1;
  }
  return woken;
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
