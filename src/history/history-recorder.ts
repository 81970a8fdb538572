import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { Counter } from 'prom-client';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { errorMessage } from '../common/error-message';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { MetricsService } from '../metrics/metrics.service';
import { HistoryRepository, MinuteCounts } from './history.repository';

const MINUTE_MS = 60_000;

/**
 * Counts kept between flushes, at most: a database down for long loses the newest minutes' counts, not the broker's
 * memory. One entry is a queue and a minute.
 */
export const HISTORY_MAX_PENDING = 100_000;

/** Rows per flush statement: a broker serving many queues sends several statements, none of them huge. */
const FLUSH_CHUNK = 2_000;

/** How long the flush at shutdown may take before the broker stops without it. */
const SHUTDOWN_FLUSH_MS = 2_000;

/**
 * The console's history, written by the paths that count (push, pop, ack) and not by scanning: each adds to a
 * queue's counts for the current minute here, in memory, and every HISTORY_FLUSH_MS this process adds what it has to
 * the minute buckets in the database, one row per queue and minute it saw, plus one per tenant and minute. Brokers
 * add to the same rows; a flush that fails keeps its counts for the next one.
 */
@Injectable()
export class HistoryRecorder implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('History');
  private readonly flushMs: number;
  private pending = new Map<string, MinuteCounts>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly dropped: Counter;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly history: HistoryRepository,
    private readonly transactions: TransactionRunner,
    private readonly drain: DrainService,
    metrics: MetricsService,
  ) {
    this.flushMs = config.history.flushMs;
    this.dropped = new Counter({
      name: 'leasehold_history_dropped_total',
      help:
        'Counts of a queue and minute the console history could not keep: more were waiting for a flush than ' +
        `${HISTORY_MAX_PENDING} (the database unreachable for long).`,
      registers: [metrics.registry],
    });
  }

  get enabled(): boolean {
    return this.flushMs > 0;
  }

  onApplicationBootstrap(): void {
    if (this.enabled) this.schedule();
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.enabled) return;
    // The last requests' counts first.
    await this.drain.drained();
    let timeout: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timeout = setTimeout(resolve, SHUTDOWN_FLUSH_MS)));
    await Promise.race([this.flush(), late]);
    clearTimeout(timeout);
  }

  pushed(tenantId: string, queue: string, messages: number): void {
    const counts = this.countsOf(tenantId, queue);
    if (counts) counts.pushed += messages;
  }

  /** `oldestCreatedAt`: the push time, by the database clock, of the longest-waiting message delivered. */
  popped(tenantId: string, queue: string, messages: number, oldestCreatedAt: string): void {
    const counts = this.countsOf(tenantId, queue);
    if (!counts) return;
    counts.popped += messages;
    const waitedMs = Math.max(0, Date.now() - Date.parse(oldestCreatedAt));
    if (Number.isFinite(waitedMs)) counts.maxWaitMs = longest(counts.maxWaitMs, waitedMs);
  }

  acked(tenantId: string, queue: string, messages: number): void {
    const counts = this.countsOf(tenantId, queue);
    if (counts) counts.acked += messages;
  }

  deadLettered(tenantId: string, queue: string, messages: number): void {
    const counts = this.countsOf(tenantId, queue);
    if (counts) counts.deadLettered += messages;
  }

  /** Adds what this process counted to the database now; one flush at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.flushPending().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async flushPending(): Promise<void> {
    if (this.pending.size === 0) return;
    const sent = [...this.pending.values()];
    this.pending = new Map();
    for (let start = 0; start < sent.length; start += FLUSH_CHUNK) {
      const chunk = sent.slice(start, start + FLUSH_CHUNK);
      try {
        await this.transactions.runOne(undefined, this.history.add(chunk));
      } catch (error) {
        this.logger.warn(`Adding ${chunk.length} queue-minutes to the history failed: ${errorMessage(error)}`);
        for (const counts of sent.slice(start)) this.keep(counts);
        return;
      }
    }
  }

  /** Counts of a failed flush go back, added to whatever came meanwhile. */
  private keep(counts: MinuteCounts): void {
    const key = keyOf(counts.tenantId, counts.queue, counts.minute);
    const now = this.pending.get(key);
    if (!now) {
      if (this.pending.size >= HISTORY_MAX_PENDING) return this.dropped.inc();
      this.pending.set(key, counts);
      return;
    }
    now.pushed += counts.pushed;
    now.popped += counts.popped;
    now.acked += counts.acked;
    now.deadLettered += counts.deadLettered;
    now.maxWaitMs = longest(now.maxWaitMs, counts.maxWaitMs);
  }

  private countsOf(tenantId: string, queue: string): MinuteCounts | undefined {
    if (!this.enabled) return undefined;
    const minute = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
    const key = keyOf(tenantId, queue, minute);
    let counts = this.pending.get(key);
    if (!counts) {
      if (this.pending.size >= HISTORY_MAX_PENDING) {
        this.dropped.inc();
        return undefined;
      }
      counts = { tenantId, queue, minute, pushed: 0, popped: 0, acked: 0, deadLettered: 0, maxWaitMs: null };
      this.pending.set(key, counts);
    }
    return counts;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      void this.flush().finally(() => {
        if (this.timer) this.schedule();
      });
    }, this.flushMs);
    this.timer.unref();
  }
}

/** As GREATEST does in the flush: null is no wait yet. */
function longest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b);
}

function keyOf(tenantId: string, queue: string, minute: number): string {
  return `${tenantId}\n${minute}\n${queue}`;
}
