import cluster from 'node:cluster';
import { Inject, Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { APP_CONFIG, AppConfig } from '../config/app-config';

export const OTHER_QUEUES = '__other__';

export const REDELIVERY_CAUSES = ['expiry', 'nack', 'retry'] as const;
export type RedeliveryCause = (typeof REDELIVERY_CAUSES)[number];

/**
 * One registry per application: several brokers may share a process in tests. A `tenant` label only with
 * METRICS_TENANT_LABELS: a series per tenant and queue can outgrow Prometheus. Queues past METRICS_MAX_QUEUE_SERIES,
 * or past their tenant's METRICS_MAX_QUEUE_SERIES_PER_TENANT, add up in `__other__`, so a tenant creating queues by
 * the thousand can neither make every scrape longer nor leave other tenants' queues without series.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  private readonly tenantLabels: boolean;
  private readonly maxQueueSeries: number;
  private readonly maxQueueSeriesPerTenant: number;
  /** Each queue series, with the tenants whose queue it counts (several share one without tenant labels). */
  private readonly seriesTenants = new Map<string, Set<string>>();
  /** Each tenant's queue series: its share of them. */
  private readonly tenantSeries = new Map<string, Set<string>>();
  private readonly otherQueues: Record<string, string>;
  /** prom-client's process_* and nodejs_* metrics, which belong to one process even in a group of workers. */
  readonly processMetrics: ReadonlySet<string>;

  readonly renewals: Counter<'outcome'>;
  readonly renewalSlack: Histogram;
  readonly renewalGroupSize: Histogram;
  readonly renewalStatementSeconds: Histogram;
  readonly leasesLost: Counter<string>;
  readonly redeliveredMessages: Counter<string>;
  readonly deadLettered: Counter<string>;
  readonly pushedMessages: Counter<string>;
  readonly poppedMessages: Counter<string>;
  readonly acks: Counter<'status' | 'outcome'>;
  readonly ackPaths: Counter<'path'>;
  readonly transactions: Counter<'outcome'>;
  readonly streamCycles: Counter<'outcome'>;
  readonly pops: Counter<'outcome'>;
  readonly quotaRefusals: Counter<'quota'>;
  readonly retentionDeleted: Counter<'reason'>;
  readonly retentionRunSeconds: Histogram;
  readonly httpDuration: Histogram<'method' | 'route' | 'status_class'>;
  readonly databaseRetries: Counter<'sqlstate'>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.tenantLabels = config.metrics.tenantLabels;
    this.maxQueueSeries = config.metrics.maxQueueSeries;
    this.maxQueueSeriesPerTenant = config.metrics.maxQueueSeriesPerTenant;
    this.otherQueues = this.tenantLabels ? { tenant: OTHER_QUEUES, queue: OTHER_QUEUES } : { queue: OTHER_QUEUES };
    const registers = [this.registry];
    const queueLabels = this.tenantLabels ? ['tenant', 'queue'] : ['queue'];
    // Per-worker series among WORKERS: summed or averaged, memory, CPU and event loop hide the one in trouble.
    const labels = cluster.isWorker && config.workers > 1 ? { worker: String(cluster.worker!.id) } : undefined;
    collectDefaultMetrics({ register: this.registry, prefix: 'leasehold_', labels });
    this.processMetrics = new Set(this.registry.getMetricsAsArray().map((metric) => metric.name));

    this.renewals = new Counter({
      name: 'leasehold_lease_renewals_total',
      help:
        'Lease extend requests, by outcome: renewed (at least one row extended), at_ceiling (live, but held at ' +
        'LEASE_MAX_TOTAL_SECONDS), busy (rows held by another transaction were left, not waited for) or ' +
        'not_renewed (renewed 0).',
      labelNames: ['outcome'],
      registers,
    });
    this.renewalSlack = new Histogram({
      name: 'leasehold_lease_renewal_slack_seconds',
      help: 'Seconds the lease still had when a successful renewal reached it (its tightest row). Near zero: workers renew too late.',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 900, 3600],
      registers,
    });
    this.renewalGroupSize = new Histogram({
      name: 'leasehold_renewal_group_size',
      help: 'Renewal requests run together in one statement.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
      registers,
    });
    this.renewalStatementSeconds = new Histogram({
      name: 'leasehold_renewal_statement_seconds',
      help: 'Time of one renewal statement, connection included, successful or not.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.leasesLost = new Counter({
      name: 'leasehold_leases_lost_total',
      help: 'Batches claimed again because their lease had expired unrenewed (counted per partition, at the claim that took them back).',
      labelNames: queueLabels,
      registers,
    });
    this.redeliveredMessages = new Counter({
      name: 'leasehold_redelivered_messages_total',
      help: 'Messages made claimable again, by cause: expiry (counted when claimed again), nack, retry (counted at the ack).',
      labelNames: [...queueLabels, 'cause'],
      registers,
    });
    this.deadLettered = new Counter({
      name: 'leasehold_dead_lettered_messages_total',
      help: 'Messages moved to the dead-letter queue after their retry limit.',
      labelNames: queueLabels,
      registers,
    });
    this.pushedMessages = new Counter({
      name: 'leasehold_pushed_messages_total',
      help: 'Messages stored by push (duplicates not counted).',
      labelNames: queueLabels,
      registers,
    });
    this.poppedMessages = new Counter({
      name: 'leasehold_popped_messages_total',
      help: 'Messages delivered by pop, redeliveries included.',
      labelNames: queueLabels,
      registers,
    });
    this.pops = new Counter({
      name: 'leasehold_pops_total',
      help: 'Pop requests answered, by outcome: messages (200) or empty (204).',
      labelNames: ['outcome'],
      registers,
    });
    this.quotaRefusals = new Counter({
      name: 'leasehold_quota_refusals_total',
      help:
        'Requests refused because the tenant is at a quota, by quota (TENANT_MAX_QUEUES, _PARTITIONS, ' +
        '_CONSUMER_GROUPS, _STORED_BYTES, _STORED_MESSAGES).',
      labelNames: ['quota'],
      registers,
    });
    this.retentionDeleted = new Counter({
      name: 'leasehold_retention_deleted_total',
      help:
        'Rows the retention job deleted, by reason: completed (consumed by every group), retention (past ' +
        'retentionSeconds), evicted (past maxWaitTimeSeconds), dead_letter, partition (empty partitions), history ' +
        "(the console's minute buckets past HISTORY_RETENTION_DAYS).",
      labelNames: ['reason'],
      registers,
    });
    this.retentionRunSeconds = new Histogram({
      name: 'leasehold_retention_run_seconds',
      help: "One round of this process's retention job, over every queue whose turn had come.",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.acks = new Counter({
      name: 'leasehold_acks_total',
      help: 'Acknowledgments, by status (completed, failed, retry) and outcome (accepted, refused).',
      labelNames: ['status', 'outcome'],
      registers,
    });
    this.ackPaths = new Counter({
      name: 'leasehold_ack_requests_total',
      help:
        'Ack requests by path: claim (decided on the cursor its pop left here, one round trip), moved (so decided, ' +
        'but the cursor had moved: locked after), lock (locked from the start: a nack, another process, several ' +
        'partitions).',
      labelNames: ['path'],
      registers,
    });
    this.transactions = new Counter({
      name: 'leasehold_transactions_total',
      help:
        'Transactions (POST /api/v1/transaction), by outcome: committed, or the reason it was rolled back ' +
        '(bad_request, ack_rejected, lease_lost, duplicate, payload_too_large, db_error).',
      labelNames: ['outcome'],
      registers,
    });
    this.streamCycles = new Counter({
      name: 'leasehold_stream_cycles_total',
      help:
        'Stream cycles (POST /streams/v1/cycle), by outcome: committed, or the reason it was refused (lease_lost, ' +
        'ack_rejected, queue_full, db_error).',
      labelNames: ['outcome'],
      registers,
    });
    this.databaseRetries = new Counter({
      name: 'leasehold_database_retries_total',
      help:
        'Units of work (and renewal statements) PostgreSQL rolled back and the broker ran again, by SQLSTATE: ' +
        '40P01 (deadlock) or 40001 (serialization failure).',
      labelNames: ['sqlstate'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'leasehold_http_request_duration_seconds',
      help: 'HTTP requests, from arrival to the end of the answer, by route pattern and status class.',
      labelNames: ['method', 'route', 'status_class'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
  }

  watchDispatch(dispatch: { readonly waiting: number; readonly deferred: number }): void {
    new Gauge({
      name: 'leasehold_http_requests_waiting',
      help: "Requests this process has received but not started yet, waiting for their tenant's turn.",
      registers: [this.registry],
      collect() {
        this.set(dispatch.waiting);
      },
    });
    let counted = 0;
    new Counter({
      name: 'leasehold_http_requests_deferred_total',
      help: "Requests that waited for their tenant's turn because the process had more to do than it could start at once.",
      registers: [this.registry],
      collect() {
        this.inc(dispatch.deferred - counted);
        counted = dispatch.deferred;
      },
    });
  }

  /** Counted by the fast path as plain numbers, so that serving a request costs an addition. */
  watchFastPath(routes: () => ReadonlyArray<{ readonly path: string; readonly served: number }>): void {
    const counted = new Map<object, number>();
    new Counter({
      name: 'leasehold_fast_path_requests_total',
      help: 'Requests served ahead of the router (the fast path), by route pattern.',
      labelNames: ['route'],
      registers: [this.registry],
      collect() {
        for (const route of routes()) {
          this.inc({ route: route.path }, route.served - (counted.get(route) ?? 0));
          counted.set(route, route.served);
        }
      },
    });
  }

  /** See RetentionService.lagSeconds and docs/operations.md. */
  watchRetentionLag(lagSeconds: () => number): void {
    new Gauge({
      name: 'leasehold_retention_lag_seconds',
      help:
        "How far this process's retention job is behind: seconds since the oldest work it knows of and has not " +
        'done became due (0: none).',
      registers: [this.registry],
      collect() {
        this.set(lagSeconds());
      },
    });
  }

  /** The labels of a queue's series: its own while it holds one or there is one free for it, else `__other__`. */
  queue(tenantId: string, queue: string): Record<string, string> {
    const key = this.seriesKey(tenantId, queue);
    const tenants = this.seriesTenants.get(key);
    if (!tenants?.has(tenantId)) {
      const held = this.tenantSeries.get(tenantId);
      if ((held?.size ?? 0) >= this.maxQueueSeriesPerTenant) return this.otherQueues;
      if (!tenants && this.seriesTenants.size >= this.maxQueueSeries) return this.otherQueues;
      this.seriesTenants.set(key, (tenants ?? new Set()).add(tenantId));
      this.tenantSeries.set(tenantId, (held ?? new Set()).add(key));
    }
    return this.labelsOf(tenantId, queue);
  }

  /**
   * A deleted queue gives its series back: the tenant's share and the total, and its series leave the registry
   * (a same-named queue of another tenant keeps a shared one). Created again, it takes a series like a new queue.
   */
  queueDeleted(tenantId: string, queue: string): void {
    const key = this.seriesKey(tenantId, queue);
    const tenants = this.seriesTenants.get(key);
    if (!tenants?.delete(tenantId)) return;
    const held = this.tenantSeries.get(tenantId)!;
    held.delete(key);
    if (held.size === 0) this.tenantSeries.delete(tenantId);
    if (tenants.size > 0) return;
    this.seriesTenants.delete(key);
    const labels = this.labelsOf(tenantId, queue);
    for (const counter of [this.leasesLost, this.deadLettered, this.pushedMessages, this.poppedMessages]) {
      counter.remove(labels);
    }
    for (const cause of REDELIVERY_CAUSES) this.redeliveredMessages.remove({ ...labels, cause });
  }

  private seriesKey(tenantId: string, queue: string): string {
    return this.tenantLabels ? `${tenantId}\n${queue}` : queue;
  }

  private labelsOf(tenantId: string, queue: string): Record<string, string> {
    return this.tenantLabels ? { tenant: tenantId, queue } : { queue };
  }
}
