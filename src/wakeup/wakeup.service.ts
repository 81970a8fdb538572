import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Client, Notification } from 'pg';
import { compositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseServer } from '../database/database-server';
import { DrainService } from '../lifecycle/drain.service';

/** The PostgreSQL channel every broker process listens on for pushes. */
export const PUSH_CHANNEL = 'leasehold_push';

export type WaitOutcome = 'woken' | 'timeout' | 'aborted' | 'closing';

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;
const HEARTBEAT_MS = 15_000;

/** What one push brought to one queue: new messages per partition name. */
export type QueueWork = Map<string, number>;

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
 * Wakes parked long polls when messages arrive. Pushes made by this process
 * wake its own waiters directly; pushes made by any other process arrive as
 * NOTIFY on one dedicated connection outside the pool, so a parked poll holds
 * no pooled connection. The embedded database delivers NOTIFY to whichever
 * connection happens to be active, which is why the in-process path exists.
 *
 * A push wakes only as many waiters as it brought messages, per consumer
 * group, oldest first, and a partition's waiters only for that partition's
 * messages: a thousand parked polls and a push of five messages make five
 * claims, not a thousand. A tenant may have POP_MAX_WAITING_PER_TENANT polls
 * parked in this process; more are refused (429) instead of parked.
 */
@Injectable()
export class WakeupService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WakeupService.name);
  /** Tells this process's own notifications apart: its waiters were already woken directly. */
  private readonly origin = randomUUID();
  /** Per (tenant, queue), in the order they parked. */
  private readonly waiters = new Map<string, Set<WakeupSubscription>>();
  private readonly parkedPerTenant = new Map<string, number>();
  private readonly maxParkedPerTenant: number;
  private client: Client | undefined;
  private url: string | undefined;
  private reconnectDelayMs = RECONNECT_MIN_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private closing = false;

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
    return subscription;
  }

  /** Wakes this process's waiters for what a push brought; call after it committed. */
  announce(tenantId: string, work: Map<string, QueueWork>): void {
    for (const [queue, partitions] of work) this.wake(compositeKey(tenantId, queue), partitions);
  }

  /**
   * NOTIFY payloads for a push, to be sent inside its transaction so they go
   * out on commit: origin, tenant, queue, message count, then each partition
   * with its count (left out when they would not fit: then any waiter may go).
   */
  notificationsFor(tenantId: string, work: Map<string, QueueWork>): string[] {
    return [...work].map(([queue, partitions]) => {
      const total = [...partitions.values()].reduce((sum, count) => sum + count, 0);
      const head = compositeKey(this.origin, tenantId, queue, String(total));
      const full = compositeKey(head, ...[...partitions].map(([partition, count]) => `${partition}\t${count}`));
      return Buffer.byteLength(full) <= NOTIFY_PAYLOAD_BYTES ? full : head;
    });
  }

  /**
   * Per consumer group, wakes waiters oldest first while the push's messages
   * last: one message each, and a partition's waiter only for its
   * partition's messages. `partitions` undefined: the push did not say which.
   */
  private wake(key: string, partitions: QueueWork | undefined, total = sumOf(partitions)): void {
    const set = this.waiters.get(key);
    if (!set) return;
    const left = new Map<string, { total: number; partitions: Map<string, number> | undefined }>();
    for (const subscription of set) {
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
    const parked = (this.parkedPerTenant.get(subscription.tenantId) ?? 1) - 1;
    if (parked > 0) this.parkedPerTenant.set(subscription.tenantId, parked);
    else this.parkedPerTenant.delete(subscription.tenantId);
  }

  private onNotification(message: Notification): void {
    const [origin, tenantId, queue, total, ...partitions] = (message.payload ?? '').split('\n');
    if (message.channel !== PUSH_CHANNEL || total === undefined || origin === this.origin) return;
    const work: QueueWork | undefined =
      partitions.length === 0
        ? undefined
        : new Map(partitions.map((entry) => [entry.slice(0, entry.lastIndexOf('\t')), Number(entry.slice(entry.lastIndexOf('\t') + 1))]));
    this.wake(compositeKey(tenantId, queue), work, Number(total));
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
      await client.query(`LISTEN ${PUSH_CHANNEL}`);
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

function sumOf(partitions: QueueWork | undefined): number {
  let total = 0;
  for (const count of partitions?.values() ?? []) total += count;
  return total;
}
