import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Client, Notification } from 'pg';
import { compositeKey, splitCompositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseServer } from '../database/database-server';
import { DrainService } from '../lifecycle/drain.service';

/** The PostgreSQL channel every broker process listens on for pushes. */
export const PUSH_CHANNEL = 'leasehold_push';
/** And for messages claimable again by one consumer group: a nack, a lease released by an ack. */
export const REDELIVERY_CHANNEL = 'leasehold_redelivery';

export type WaitOutcome = 'woken' | 'timeout' | 'aborted' | 'closing';

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;
const HEARTBEAT_MS = 15_000;

/** What one push brought to one queue: new messages per partition name. */
export type QueueWork = Map<string, number>;

/** Messages of one queue claimable again by one consumer group, per partition name. */
export interface Redelivery {
  queue: string;
  consumerGroup: string;
  partitions: QueueWork;
}

/** A NOTIFY to send inside a transaction, so that it goes out on commit. */
export interface Notice {
  channel: string;
  payload: string;
}

/** NOTIFY payloads stay below PostgreSQL's 8000 bytes; past this a push names no partitions. */
const NOTIFY_PAYLOAD_BYTES = 7_000;

/** Interest in one queue, registered before looking for messages so a push committed meanwhile is not missed. */
export class WakeupSubscription {
  private outcome: WaitOutcome | undefined;
  private resolve: ((outcome: WaitOutcome) => void) | undefined;

  constructor(
    readonly tenantId: string,
    readonly consumerGroup: string,
    /** Only this partition's messages are claimable for it; undefined: any partition's. */
    readonly partition: string | undefined,
    /** Its tenant already had POP_MAX_WAITING_PER_TENANT polls parked: it is not registered and must not park. */
    readonly refused: boolean,
    private readonly detach: (subscription: WakeupSubscription) => void,
  ) {}

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  /** Waiting in wait(): its poll looked and found nothing. */
  get parked(): boolean {
    return this.resolve !== undefined && this.outcome === undefined;
  }

  settle(outcome: WaitOutcome): void {
    if (this.outcome) return;
    this.outcome = outcome;
    this.resolve?.(outcome);
  }

  /** Resolves on a push to the queue, the timeout, the abort signal or shutdown, whichever comes first. */
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

/**
 * Wakes parked long polls when something they could claim becomes
 * claimable: a push, a nack or a lease released by an ack, a lease expiring
 * (LeaseExpiryService). What this process did wakes its own waiters directly;
 * what any other process did arrives as NOTIFY on one dedicated connection
 * outside the pool, so a parked poll holds no pooled connection. The
 * embedded database delivers NOTIFY to whichever connection happens to be
 * active, which is why the in-process path exists.
 *
 * A push wakes only as many waiters as it brought messages, per consumer
 * group, oldest first, and a partition's waiters only for that partition's
 * messages: a thousand parked polls and a push of five messages make five
 * claims, not a thousand. A redelivery wakes only its own group's waiters.
 * A tenant may have POP_MAX_WAITING_PER_TENANT polls parked in this
 * process; more are refused (429) instead of parked.
 */
@Injectable()
export class WakeupService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WakeupService.name);
  /** Tells this process's own notifications apart: its waiters were already woken directly. */
  private readonly origin = randomUUID();
  /** Per (tenant, queue), in the order they parked. */
  private readonly waiters = new Map<string, Set<WakeupSubscription>>();
  private readonly parkedPerTenant = new Map<string, number>();
  /** Parked polls per (tenant, queue, consumer group): what LeaseExpiryService looks for. */
  private readonly parkedPerGroup = new Map<string, number>();
  private readonly maxParkedPerTenant: number;
  private client: Client | undefined;
  private url: string | undefined;
  private reconnectDelayMs = RECONNECT_MIN_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private closing = false;
  private everConnected = false;

  constructor(
    private readonly server: DatabaseServer,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    drain: DrainService,
  ) {
    this.maxParkedPerTenant = config.limits.popMaxWaitingPerTenant;
    drain.onDrain(() => this.closeWaiters());
  }

  /** True while the LISTEN connection is up (cross-process wakeups are being received). */
  get listening(): boolean {
    return this.client !== undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    this.url = await this.server.url();
    await this.connect();
  }

  /**
   * Draining: every parked poll answers at once (503, so its client retries
   * elsewhere instead of polling this broker again), and so does any poll that
   * would park from now on.
   */
  private closeWaiters(): void {
    this.closing = true;
    for (const subscriptions of this.waiters.values()) {
      for (const subscription of subscriptions) subscription.settle('closing');
    }
    this.waiters.clear();
    this.parkedPerTenant.clear();
    this.parkedPerGroup.clear();
  }

  async onApplicationShutdown(): Promise<void> {
    this.closeWaiters();
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  subscribe(tenantId: string, queue: string, consumerGroup: string, partition: string | undefined): WakeupSubscription {
    const key = compositeKey(tenantId, queue);
    const parked = this.parkedPerTenant.get(tenantId) ?? 0;
    const refused = !this.closing && parked >= this.maxParkedPerTenant;
    const subscription = new WakeupSubscription(tenantId, consumerGroup, partition, refused, (done) =>
      this.detach(key, done),
    );
    if (this.closing) {
      subscription.settle('closing');
      return subscription;
    }
    if (refused) return subscription;
    let set = this.waiters.get(key);
    if (!set) {
      set = new Set();
      this.waiters.set(key, set);
    }
    set.add(subscription);
    this.parkedPerTenant.set(tenantId, parked + 1);
    const groupKey = compositeKey(tenantId, queue, consumerGroup);
    this.parkedPerGroup.set(groupKey, (this.parkedPerGroup.get(groupKey) ?? 0) + 1);
    return subscription;
  }

  /** Polls registered to wait in this process, every tenant. */
  get parkedTotal(): number {
    let total = 0;
    for (const count of this.parkedPerTenant.values()) total += count;
    return total;
  }

  /** Whether a poll of this group is parked here. */
  isWaiting(tenantId: string, queue: string, consumerGroup: string): boolean {
    return this.parkedPerGroup.has(compositeKey(tenantId, queue, consumerGroup));
  }

  /** Polls of the group that looked, found nothing and now wait here. */
  parkedCount(tenantId: string, queue: string, consumerGroup: string): number {
    let parked = 0;
    for (const subscription of this.waiters.get(compositeKey(tenantId, queue)) ?? []) {
      if (subscription.consumerGroup === consumerGroup && subscription.parked) parked += 1;
    }
    return parked;
  }

  /** Every (tenant, queue, consumer group) with a poll parked here. */
  waitingGroups(): Array<{ tenantId: string; queue: string; consumerGroup: string }> {
    return [...this.parkedPerGroup.keys()].map((key) => {
      const [tenantId, queue, consumerGroup] = splitCompositeKey(key);
      return { tenantId, queue, consumerGroup };
    });
  }

  /** Wakes this process's waiters for what a push brought; call after it committed. */
  announce(tenantId: string, work: Map<string, QueueWork>): void {
    for (const [queue, partitions] of work) this.wake(compositeKey(tenantId, queue), partitions);
  }

  /** Wakes this process's waiters of each group for messages it can claim again; call after commit. */
  announceRedeliveries(tenantId: string, redeliveries: Redelivery[]): void {
    for (const { queue, consumerGroup, partitions } of redeliveries) {
      this.wake(compositeKey(tenantId, queue), partitions, sumOf(partitions), consumerGroup);
    }
  }

  /**
   * NOTIFY payloads for a push: origin, tenant, queue, message count, then
   * each partition with its count (left out when they would not fit: then
   * any waiter may go).
   */
  notificationsFor(tenantId: string, work: Map<string, QueueWork>): Notice[] {
    return [...work].map(([queue, partitions]) => ({
      channel: PUSH_CHANNEL,
      payload: this.payload([tenantId, queue], partitions),
    }));
  }

  /** NOTIFY payloads for redeliveries: as for a push, with the consumer group after the queue. */
  redeliveryNotificationsFor(tenantId: string, redeliveries: Redelivery[]): Notice[] {
    return redeliveries.map(({ queue, consumerGroup, partitions }) => ({
      channel: REDELIVERY_CHANNEL,
      payload: this.payload([tenantId, queue, consumerGroup], partitions),
    }));
  }

  private payload(names: string[], partitions: QueueWork): string {
    const head = compositeKey(this.origin, ...names, String(sumOf(partitions)));
    const full = compositeKey(head, ...[...partitions].map(([partition, count]) => `${partition}\t${count}`));
    return Buffer.byteLength(full) <= NOTIFY_PAYLOAD_BYTES ? full : head;
  }

  /**
   * Per consumer group (or only `consumerGroup`'s), wakes waiters oldest
   * first while the messages last: one message each, and a partition's
   * waiter only for its partition's messages. `partitions` undefined: the
   * sender did not say which.
   */
  wake(key: string, partitions: QueueWork | undefined, total = sumOf(partitions), consumerGroup?: string): void {
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

  /** After a gap in NOTIFY (a reconnect), every waiter looks again. */
  private wakeAll(): void {
    for (const [key, set] of [...this.waiters]) this.wake(key, undefined, set.size);
  }

  private detach(key: string, subscription: WakeupSubscription): void {
    const set = this.waiters.get(key);
    if (!set?.delete(subscription)) return;
    if (set.size === 0) this.waiters.delete(key);
    decrement(this.parkedPerTenant, subscription.tenantId);
    decrement(this.parkedPerGroup, compositeKey(key, subscription.consumerGroup));
  }

  private onNotification(message: Notification): void {
    const fields = (message.payload ?? '').split('\n');
    const redelivery = message.channel === REDELIVERY_CHANNEL;
    if (!redelivery && message.channel !== PUSH_CHANNEL) return;
    const [origin, tenantId, queue] = fields;
    const consumerGroup = redelivery ? fields[3] : undefined;
    const [total, ...partitions] = fields.slice(redelivery ? 4 : 3);
    if (total === undefined || origin === this.origin) return;
    const work: QueueWork | undefined =
      partitions.length === 0
        ? undefined
        : new Map(
            partitions.map((entry) => [
              entry.slice(0, entry.lastIndexOf('\t')),
              Number(entry.slice(entry.lastIndexOf('\t') + 1)),
            ]),
          );
    this.wake(compositeKey(tenantId, queue), work, Number(total), consumerGroup);
  }

  private async connect(): Promise<void> {
    if (this.closing || !this.url) return;
    const { database } = this.config;
    const client = new Client({
      connectionString: this.url,
      application_name: 'leasehold-listener',
      connectionTimeoutMillis: database.acquireTimeoutMs,
      query_timeout: database.statementTimeoutMs,
      keepAlive: true,
    });
    client.on('notification', (message) => this.onNotification(message));
    client.on('error', (error) => this.dropped(client, error));
    client.on('end', () => this.dropped(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${PUSH_CHANNEL}; LISTEN ${REDELIVERY_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      this.logger.warn(`LISTEN connection failed (${messageOf(error)}); retrying in ${this.reconnectDelayMs} ms`);
      this.scheduleReconnect();
      return;
    }
    if (this.closing) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    if (this.reconnectDelayMs > RECONNECT_MIN_MS || this.everConnected) this.logger.log('LISTEN connection up again');
    this.everConnected = true;
    this.reconnectDelayMs = RECONNECT_MIN_MS;
    this.heartbeatTimer = setInterval(() => this.heartbeat(client), HEARTBEAT_MS).unref();
    // Pushes made while the connection was down were not heard: let every waiter look again.
    this.wakeAll();
  }

  /** A half-open TCP connection never errors by itself; a periodic round trip finds it. */
  private heartbeat(client: Client): void {
    client.query('SELECT 1').catch((error: unknown) => {
      this.dropped(client, error);
      client.end().catch(() => undefined);
    });
  }

  private dropped(client: Client, error?: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    clearInterval(this.heartbeatTimer);
    if (this.closing) return;
    this.logger.warn(`LISTEN connection lost${error ? ` (${messageOf(error)})` : ''}; reconnecting`);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closing) return;
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(delay * 2, RECONNECT_MAX_MS);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay).unref();
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
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
