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

/** Interest in one queue, registered before looking for messages so a push committed meanwhile is not missed. */
export class WakeupSubscription {
  private outcome: WaitOutcome | undefined;
  private resolve: ((outcome: WaitOutcome) => void) | undefined;

  constructor(private readonly detach: (subscription: WakeupSubscription) => void) {}

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
 */
@Injectable()
export class WakeupService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WakeupService.name);
  /** Tells this process's own notifications apart: its waiters were already woken directly. */
  private readonly origin = randomUUID();
  private readonly waiters = new Map<string, Set<WakeupSubscription>>();
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
  }

  async onApplicationShutdown(): Promise<void> {
    this.closeWaiters();
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  subscribe(tenantId: string, queue: string): WakeupSubscription {
    const key = compositeKey(tenantId, queue);
    const subscription = new WakeupSubscription((done) => this.detach(key, done));
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
    return subscription;
  }

  /** Wakes this process's waiters on these queues; call after the push committed. */
  announce(tenantId: string, queues: Iterable<string>): void {
    for (const queue of queues) this.wake(compositeKey(tenantId, queue));
  }

  /** NOTIFY payloads for a push, to be sent inside its transaction so they go out on commit. */
  notificationsFor(tenantId: string, queues: Iterable<string>): string[] {
    return [...queues].map((queue) => compositeKey(this.origin, tenantId, queue));
  }

  private wake(key: string): void {
    const set = this.waiters.get(key);
    if (!set) return;
    this.waiters.delete(key);
    for (const subscription of set) subscription.settle('woken');
  }

  private wakeAll(): void {
    for (const key of [...this.waiters.keys()]) this.wake(key);
  }

  private detach(key: string, subscription: WakeupSubscription): void {
    const set = this.waiters.get(key);
    if (!set) return;
    set.delete(subscription);
    if (set.size === 0) this.waiters.delete(key);
  }

  private onNotification(message: Notification): void {
    const payload = message.payload ?? '';
    const separator = payload.indexOf('\n');
    if (message.channel !== PUSH_CHANNEL || separator < 0 || payload.slice(0, separator) === this.origin) return;
    this.wake(payload.slice(separator + 1));
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
