import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Client, Notification } from 'pg';
import { compositeKey } from '../common/composite-key';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseServer } from '../database/database-server';
import { connectSession } from '../database/session-settings';
import { ParkedPolls, QueueWork, Redelivery, sumOf } from './parked-polls';
import { errorMessage } from '../common/error-message';
import { shared, Sql, sql } from '../database/statement';

export const PUSH_CHANNEL = 'leasehold_push';
export const REDELIVERY_CHANNEL = 'leasehold_redelivery';
export const QUEUE_DELETED_CHANNEL = 'leasehold_queue_deleted';

export type QueueDeletedListener = (tenantId: string, queue: string) => void;

export interface Notice {
  channel: string;
  payload: string;
}

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;
const HEARTBEAT_MS = 15_000;
/** NOTIFY payloads stay below PostgreSQL's 8000 bytes; past this a notice names no partitions. */
const NOTIFY_PAYLOAD_BYTES = 7_000;

/**
 * The LISTEN connection is outside the pool, so a parked poll holds no pooled connection. The embedded database
 * delivers NOTIFY to whichever connection happens to be active, which is why a process wakes its own polls directly.
 */
@Injectable()
export class WakeupChannel implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Wakeups');
  /** Tells this process's own notices apart: its waiters were already woken directly. */
  private readonly origin = randomUUID();
  private client: Client | undefined;
  private url: string | undefined;
  private reconnectDelayMs = RECONNECT_MIN_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private closing = false;
  private everConnected = false;
  private readonly deletionListeners: QueueDeletedListener[] = [];

  constructor(
    private readonly server: DatabaseServer,
    private readonly polls: ParkedPolls,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get listening(): boolean {
    return this.client !== undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    this.url = await this.server.url();
    await this.connect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    this.polls.closeAll();
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** Queues deleted by another process: what this one keeps of them (metric series) can go. */
  onQueueDeleted(listener: QueueDeletedListener): void {
    this.deletionListeners.push(listener);
  }

  notices(
    tenantId: string,
    pushed: Map<string, QueueWork>,
    redelivered: Redelivery[],
    deletedQueues: readonly string[] = [],
  ): Notice[] {
    return [
      ...deletedQueues.map((queue) => ({
        channel: QUEUE_DELETED_CHANNEL,
        payload: compositeKey(this.origin, tenantId, queue),
      })),
      ...[...pushed].map(([queue, partitions]) => ({
        channel: PUSH_CHANNEL,
        payload: this.payload([tenantId, queue], partitions),
      })),
      ...redelivered.map(({ queue, consumerGroup, partitions }) => ({
        channel: REDELIVERY_CHANNEL,
        payload: this.payload([tenantId, queue, consumerGroup], partitions),
      })),
    ];
  }

  /**
   * The notice notices() sends for a redelivery of one partition, as a call of pg_notify for a statement that alone
   * knows how many messages are claimable again (`messages`, an SQL expression).
   */
  redeliveryNotify(tenantId: string, queue: string, consumerGroup: string, partition: string, messages: Sql): Sql {
    // Each part up to where the count goes; the SQL writes the count after it.
    const head = this.head([tenantId, queue, consumerGroup], '');
    const entry = shared(compositeKey('', partitionEntry(partition, '')));
    // The longest count PostgreSQL can write is 20 characters.
    const fits = Buffer.byteLength(head) + Buffer.byteLength(entry.value) + 40 <= NOTIFY_PAYLOAD_BYTES;
    return sql`pg_notify(${REDELIVERY_CHANNEL}, ${head} || ${messages}::text
                 || CASE WHEN ${fits} THEN ${entry} || ${messages}::text ELSE '' END)`;
  }

  /** The head, then each partition's count unless they would not fit. */
  private payload(names: string[], partitions: QueueWork): string {
    const head = this.head(names, String(sumOf(partitions)));
    const full = compositeKey(
      head,
      ...[...partitions].map(([partition, count]) => partitionEntry(partition, String(count))),
    );
    return Buffer.byteLength(full) <= NOTIFY_PAYLOAD_BYTES ? full : head;
  }

  /** Origin, tenant, queue[, consumer group], total. */
  private head(names: string[], total: string): string {
    return compositeKey(this.origin, ...names, total);
  }

  private onNotification(message: Notification): void {
    const fields = (message.payload ?? '').split('\n');
    if (message.channel === QUEUE_DELETED_CHANNEL) {
      const [origin, tenantId, queue] = fields;
      if (queue === undefined || origin === this.origin) return;
      for (const listener of this.deletionListeners) listener(tenantId, queue);
      return;
    }
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
    this.polls.wake(tenantId, queue, work, Number(total), consumerGroup);
  }

  private async connect(): Promise<void> {
    if (this.closing || !this.url) return;
    const { database } = this.config;
    const client = new Client({
      connectionString: this.url,
      application_name: 'leasehold-listener',
      connectionTimeoutMillis: database.connectTimeoutMs,
      query_timeout: database.statementTimeoutMs,
      keepAlive: true,
    });
    client.on('notification', (message) => this.onNotification(message));
    client.on('error', (error) => this.dropped(client, error));
    client.on('end', () => this.dropped(client));
    try {
      await connectSession(client);
      await client.query(`LISTEN ${PUSH_CHANNEL}; LISTEN ${REDELIVERY_CHANNEL}; LISTEN ${QUEUE_DELETED_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      this.logger.warn(`LISTEN connection failed (${errorMessage(error)}); retrying in ${this.reconnectDelayMs} ms`);
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
    // What other processes made claimable while the connection was down was not heard: every waiter looks again.
    this.polls.wakeAll();
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
    this.logger.warn(`LISTEN connection lost${error ? ` (${errorMessage(error)})` : ''}; reconnecting`);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closing) return;
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(delay * 2, RECONNECT_MAX_MS);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay).unref();
  }
}

function partitionEntry(partition: string, count: string): string {
  return `${partition}\t${count}`;
}
