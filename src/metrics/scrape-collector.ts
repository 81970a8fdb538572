import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Pool } from 'pg';
import { Counter, Gauge } from 'prom-client';
import { BrokerRegistry } from '../cluster/broker-registry';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { Database } from '../database/database';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { ParkedPolls } from '../wakeup/parked-polls';
import { WakeupChannel } from '../wakeup/wakeup-channel';
import { MetricsService } from './metrics.service';
import { DeadRows, GroupLag, MetricsRepository, QueueDepth } from './metrics.repository';
import { errorMessage } from '../common/error-message';

/** Queue depth and lag are read at most this often, however often Prometheus scrapes. */
const QUEUE_STATS_MAX_AGE_MS = 10_000;
const QUEUE_STATS_TIMEOUT_MS = 2_000;

interface QueueStats {
  depth: QueueDepth[];
  lag: GroupLag[];
  deadRows: DeadRows[];
}

/** Database reads are bounded: cached between scrapes, a statement timeout, at most METRICS_MAX_QUEUE_SERIES series. */
@Injectable()
export class ScrapeCollector {
  private readonly logger = new Logger('Metrics');
  private readonly maxSeries: number;
  private readonly tenantLabels: boolean;
  private readonly retentionIntervalMs: number;
  private cached: { at: number; stats: QueueStats } | undefined;
  private reading: Promise<QueueStats> | undefined;
  private readonly failures: Counter;
  /** The same whichever process reads them: among WORKERS only the scraped worker does (see MetricsExposition). */
  readonly databaseMetrics: ReadonlySet<string> = new Set([
    'leasehold_queue_depth_messages',
    'leasehold_consumer_lag_messages',
    'leasehold_table_dead_rows',
  ]);

  constructor(
    metrics: MetricsService,
    database: Database,
    private readonly transactions: TransactionRunner,
    private readonly repository: MetricsRepository,
    polls: ParkedPolls,
    channel: WakeupChannel,
    drain: DrainService,
    brokers: BrokerRegistry,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.maxSeries = config.metrics.maxQueueSeries;
    this.tenantLabels = config.metrics.tenantLabels;
    this.retentionIntervalMs = config.retention.intervalMs;
    const registers = [metrics.registry];
    // The process that deleted a queue frees its series itself (QueuesService); the others hear of it here.
    channel.onQueueDeleted((tenantId, queue) => metrics.queueDeleted(tenantId, queue));
    const pool = (): Pool | undefined => database.pool;
    const queueLabels = this.tenantLabels ? ['tenant', 'queue'] : ['queue'];
    this.failures = new Counter({
      name: 'leasehold_metrics_queue_stats_failures_total',
      help: 'Scrape-time reads of queue depth and lag that failed (the previous values were kept).',
      registers,
    });

    new Gauge({
      name: 'leasehold_db_pool_connections',
      help: "Connections of this process's database pool, by state: in_use (checked out) or idle.",
      labelNames: ['state'],
      registers,
      collect() {
        const current = pool();
        this.set({ state: 'in_use' }, current ? current.totalCount - current.idleCount : 0);
        this.set({ state: 'idle' }, current?.idleCount ?? 0);
      },
    });
    new Gauge({
      name: 'leasehold_db_pool_max',
      help: "Size of this process's database pool: DB_POOL_SIZE, or its share of DB_CONNECTION_BUDGET if smaller.",
      registers,
      collect() {
        this.set(pool()?.options.max ?? config.database.poolSize);
      },
    });
    new Gauge({
      name: 'leasehold_db_pool_waiting',
      help: "Requests waiting for a connection of this process's pool.",
      registers,
      collect() {
        this.set(pool()?.waitingCount ?? 0);
      },
    });
    new Gauge({
      name: 'leasehold_parked_polls',
      help: 'Long polls in progress in this process, parked or looking; a discovery poll counts once.',
      registers,
      collect() {
        this.set(polls.total);
      },
    });
    new Gauge({
      name: 'leasehold_listener_connected',
      help: "1 while this process's LISTEN connection is up (wakeups from other broker processes are heard), else 0.",
      registers,
      // Among WORKERS: 0 as soon as one worker has lost it.
      aggregator: 'min',
      collect() {
        this.set(channel.listening ? 1 : 0);
      },
    });
    new Gauge({
      name: 'leasehold_brokers_live',
      help:
        'Broker processes this process last counted as live, itself included; it enforces 1/N of each ' +
        'per-tenant rate limit and of POP_MAX_WAITING_PER_TENANT.',
      registers,
      collect() {
        this.set(brokers.liveBrokers);
      },
    });
    new Gauge({
      name: 'leasehold_draining',
      help: '1 once this process has begun shutting down, else 0.',
      registers,
      aggregator: 'max',
      collect() {
        this.set(drain.draining ? 1 : 0);
      },
    });

    const stats = (): Promise<QueueStats> => this.queueStats();
    new Gauge({
      name: 'leasehold_queue_depth_messages',
      help: 'Messages of a queue not yet acknowledged by its slowest consumer group (all of them when it has no group).',
      labelNames: queueLabels,
      registers,
      // The database's number, not this process's: never summed over workers.
      aggregator: 'max',
      async collect() {
        this.reset();
        for (const row of (await stats()).depth) this.set(labels(row), row.messages);
      },
    });
    new Gauge({
      name: 'leasehold_consumer_lag_messages',
      help: 'Messages of a queue that a consumer group has not yet acknowledged.',
      labelNames: [...queueLabels, 'consumer_group'],
      registers,
      aggregator: 'max',
      async collect() {
        this.reset();
        for (const row of (await stats()).lag) this.set({ ...labels(row), consumer_group: row.group }, row.messages);
      },
    });
    new Gauge({
      name: 'leasehold_table_dead_rows',
      help: 'Rows deleted (by retention, acks of dead letters...) that autovacuum has not reclaimed yet, by table.',
      labelNames: ['table'],
      registers,
      aggregator: 'max',
      async collect() {
        this.reset();
        for (const row of (await stats()).deadRows) this.set({ table: row.table }, row.rows);
      },
    });
    const labels = (row: { tenant: string | null; queue: string }): Record<string, string> =>
      row.tenant === null ? { queue: row.queue } : { tenant: row.tenant, queue: row.queue };
  }

  /** One read for both gauges of a scrape, and none within QUEUE_STATS_MAX_AGE_MS of the last. */
  private queueStats(): Promise<QueueStats> {
    if (this.cached && Date.now() - this.cached.at < QUEUE_STATS_MAX_AGE_MS) return Promise.resolve(this.cached.stats);
    this.reading ??= this.read()
      .then((stats) => {
        this.cached = { at: Date.now(), stats };
        return stats;
      })
      .catch((error: unknown) => {
        this.failures.inc();
        this.logger.warn(`Reading queue depth and lag failed: ${errorMessage(error)}`);
        return this.cached?.stats ?? { depth: [], lag: [], deadRows: [] };
      })
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  /** Spans tenants on purpose: these are the operator's numbers. */
  private read(): Promise<QueueStats> {
    return this.transactions.read(undefined, async (reader) => {
      await reader.run(this.repository.statementTimeout(QUEUE_STATS_TIMEOUT_MS));
      const lag = await reader.run(this.repository.groupLags(this.tenantLabels, this.maxSeries));
      const depth = await reader.run(this.repository.queueDepths(this.tenantLabels, this.maxSeries));
      const deadRows = await reader.last(this.repository.deadRows());
      return { deadRows, lag, depth };
    });
  }
}
