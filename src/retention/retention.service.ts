import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, AppConfig, RetentionConfig } from '../config/app-config';
import { TransactionRunner } from '../database/transaction-runner';
import { TenantQuotas } from '../limits/tenant-quotas';
import { HistoryRepository } from '../history/history.repository';
import { MetricsService } from '../metrics/metrics.service';
import { evictAfterSeconds, RetentionDefaults, retentionDefaultsOf, retentionPolicy } from './retention-policy';
import { PartitionRules, RetentionRepository } from './retention.repository';
import { TenantCursorWork } from '../wakeup/parked-polls';
import { Writes } from '../wakeup/writes';
import { TenantRotation } from './tenant-rotation';
import { errorMessage } from '../common/error-message';

export type RetentionReason = 'completed' | 'retention' | 'evicted' | 'dead_letter' | 'partition' | 'history';

export interface RetentionRound {
  partitions: number;
  deleted: Record<RetentionReason, number>;
  evictedToDeadLetters: number;
  /** False when the round's budget ran out with work due left: the next round starts at once. */
  finished: boolean;
}

/** A round's budget, and how soon a partition that could not be cut is looked at again, even with the timer off. */
const MIN_ROUND_MS = 1_000;
const CLAIM = 100;
/** Partitions of a queue whose retention changed made due per statement. */
const RECHECK_BATCH = 5_000;
/** A cut that reads a full batch in less than this reads twice as many next time; one past four times it, half. */
const CUT_TARGET_MS = 250;
/** How far past RETENTION_BATCH_SIZE a cut may grow. */
const MAX_BATCH_GROWTH = 64;
/** The console's minute buckets age by the minute: a look every ten minutes keeps them within ten of their limit. */
const HISTORY_CHECK_MS = 600_000;
export const EVICTED = 'evicted: waited longer than the queue allows (maxWaitTimeSeconds or ttl)';

/** A partition carries when it is next worth a look: a round's work grows with what to delete, not with queues. */
@Injectable()
export class RetentionService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Retention');
  private readonly settings: RetentionConfig;
  private readonly defaults: RetentionDefaults;
  private readonly roundMs: number;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<unknown> | undefined;
  private stopped = false;
  /** performance.now() when the oldest work found and not done yet became due; undefined: none. */
  private dueSince: number | undefined;
  private untimedSince: number | undefined;
  /** The last round stopped with work left: the next one starts at once. */
  private behind = false;
  /** Messages one cut may read: starts at RETENTION_BATCH_SIZE and follows how long cuts take (CUT_TARGET_MS). */
  private batch: number;
  private readonly historyDays: number;
  /** performance.now() of the last look for old history; undefined: none yet. */
  private historyCheckedAt: number | undefined;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly retention: RetentionRepository,
    private readonly history: HistoryRepository,
    private readonly metrics: MetricsService,
    private readonly quotas: TenantQuotas,
    private readonly writes: Writes,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.settings = config.retention;
    this.defaults = retentionDefaultsOf(config);
    this.roundMs = Math.max(MIN_ROUND_MS, this.settings.intervalMs);
    this.batch = this.settings.batchSize;
    this.historyDays = config.history.retentionDays;
    metrics.watchRetentionLag(() => this.lagSeconds());
  }

  /**
   * Seconds since the oldest work this process's job knows of and has not done became due: a due partition's check
   * time, or for a moved cursor or a recheck (which carry no time) the start of the first round that found it. Read
   * at each round's start and kept until a round ends with nothing left, so a job that stalls shows a growing lag.
   */
  lagSeconds(): number {
    return this.dueSince === undefined ? 0 : Math.max(0, (performance.now() - this.dueSince) / 1000);
  }

  onApplicationBootstrap(): void {
    if (this.settings.intervalMs === 0) return;
    // Spread over the interval, so brokers started together do not look for work together.
    this.schedule(Math.random() * this.settings.intervalMs);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round?.catch(() => undefined);
  }

  /** One round; with `tenants`, of those tenants' work alone (a tenant's purge now, or a test beside others). */
  async runOnce(tenants?: readonly string[]): Promise<RetentionRound> {
    const only = tenants === undefined ? undefined : new Set(tenants);
    const ours = (tenant: string): boolean => only === undefined || only.has(tenant);
    const outcome: RetentionRound = {
      partitions: 0,
      deleted: { completed: 0, retention: 0, evicted: 0, dead_letter: 0, partition: 0, history: 0 },
      evictedToDeadLetters: 0,
      finished: false,
    };
    const stopAt = performance.now() + this.roundMs;
    const timer = this.metrics.retentionRunSeconds.startTimer();
    try {
      // Dead letters first, within half the round: a backlog of partitions must not starve them.
      const batch = this.settings.batchSize;
      const lettersUntil = performance.now() + this.roundMs / 2;
      const lettered = new TenantRotation(
        await this.transactions
          .runOne(undefined, this.retention.tenantsWithOldDeadLetters(this.settings.deadLetterSeconds))
          .then((found) => found.filter(ours)),
        CLAIM,
      );
      while (!lettered.done && !this.stopped && performance.now() < lettersUntil) {
        const tenants = lettered.window();
        const { deleted, tenants: found } = await this.transactions.runOne(
          undefined,
          this.retention.deadLetters(this.settings.deadLetterSeconds, batch, tenants),
        );
        lettered.claimed(tenants, found, deleted === batch);
        for (const tenant of found) this.quotas.forgetStored(tenant);
        this.count(outcome, 'dead_letter', deleted);
      }
      const historyDue =
        tenants !== undefined ||
        this.historyCheckedAt === undefined ||
        performance.now() - this.historyCheckedAt >= HISTORY_CHECK_MS;
      if (historyDue) await this.deleteOldHistory(outcome, ours, performance.now() + this.roundMs / 8);
      // Queues whose retention changed: their partitions are made due, a batch per statement, before the due walk.
      const spreadUntil = performance.now() + this.roundMs / 4;
      while (!this.stopped && performance.now() < spreadUntil) {
        const spread = await this.transactions.runOne(undefined, this.retention.spreadRechecks(RECHECK_BATCH, tenants));
        if (spread === undefined) break;
      }
      const found = (await this.transactions.runOne(undefined, this.retention.tenantsWithDue())).filter((tenant) =>
        ours(tenant.tenantId),
      );
      this.noteDue(found.map((tenant) => tenant.dueSeconds));
      const due = new TenantRotation(
        found.map((tenant) => tenant.tenantId),
        CLAIM,
      );
      while (!due.done && !this.stopped && performance.now() < stopAt) {
        outcome.partitions += await this.cut(outcome, due);
      }
      this.behind = !due.done || !lettered.done;
      outcome.finished = !this.behind;
      if (due.done) this.dueSince = this.untimedSince = undefined;
    } finally {
      timer();
    }
    const deleted = Object.entries(outcome.deleted).filter(([, count]) => count > 0);
    if (deleted.length > 0) {
      this.logger.log(
        `Deleted ${deleted.map(([reason, count]) => `${count} ${reason}`).join(', ')} ` +
          `(${outcome.partitions} partitions looked at)`,
      );
    }
    return outcome;
  }

  /** Two short transactions: the cut holds cursors acks and renewals wait for; scheduling waits for pushes. */
  private async cut(outcome: RetentionRound, due: TenantRotation): Promise<number> {
    const window = { size: 0 };
    const tenants = due.window();
    const started = performance.now();
    // Run again whole after a deadlock: the rotation hears only of the claim that committed.
    const { claimed, cut } = await this.transactions.read(undefined, async (reader) => {
      const claimed = await reader.run(this.retention.claimDue(CLAIM, tenants));
      if (claimed.length === 0) return { claimed, cut: undefined };
      const rules = claimed.map((partition): PartitionRules => {
        const policy = retentionPolicy(partition.retention, this.defaults);
        return {
          tenantId: partition.tenantId,
          partitionId: partition.partitionId,
          pendingSeconds: policy.pendingSeconds,
          evictSeconds: evictAfterSeconds(policy),
          completedSeconds: policy.completedSeconds,
          letters: partition.deadLetterQueue,
          graceSeconds: this.settings.emptyPartitionGraceSeconds,
        };
      });
      await reader.run(this.retention.cursorsForCut(rules));
      // One statement reads at most about a batch of messages, however many partitions share it.
      window.size = Math.max(10, Math.floor(this.batch / claimed.length));
      return { claimed, cut: { rules, trimmed: await reader.last(this.retention.trim(rules, window.size, EVICTED)) } };
    });
    due.claimed(
      tenants,
      claimed.map((partition) => partition.tenantId),
      claimed.length === CLAIM,
    );
    if (!cut) return 0;
    this.pace(performance.now() - started, cut.trimmed.completed + cut.trimmed.retention + cut.trimmed.evicted);
    if (cut.trimmed.completed + cut.trimmed.retention + cut.trimmed.evicted > 0) {
      for (const rule of cut.rules) this.quotas.forgetStored(rule.tenantId);
    }
    const { removed, claimable } = await this.transactions.runOne(
      undefined,
      this.retention.schedule(cut.rules, this.roundMs, cut.trimmed.full),
    );
    await this.wake(claimable);
    this.count(outcome, 'completed', cut.trimmed.completed);
    this.count(outcome, 'retention', cut.trimmed.retention);
    this.count(outcome, 'evicted', cut.trimmed.evicted);
    this.count(outcome, 'partition', removed);
    outcome.evictedToDeadLetters += cut.trimmed.lettered;
    return cut.rules.length;
  }

  /** A failed wakeup leaves those polls to their timeout, as before the round; the round goes on. */
  private async wake(cursors: TenantCursorWork[]): Promise<void> {
    await this.writes.redelivered(cursors).catch((error: unknown) => {
      this.logger.warn(`Waking the polls of cursors a retention round held failed (${errorMessage(error)})`);
    });
  }

  /** Buckets past HISTORY_RETENTION_DAYS, tenant by tenant, a batch per statement, within the budget. */
  private async deleteOldHistory(
    outcome: RetentionRound,
    ours: (tenant: string) => boolean,
    until: number,
  ): Promise<void> {
    const batch = this.settings.batchSize;
    const found = (await this.transactions.runOne(undefined, this.history.tenantsWithOld(this.historyDays))).filter(
      ours,
    );
    for (const tenant of found) {
      for (let deleted = batch; deleted >= batch;) {
        if (this.stopped || performance.now() >= until) return;
        deleted = await this.transactions.runOne(undefined, this.history.deleteOld(tenant, this.historyDays, batch));
        this.count(outcome, 'history', deleted);
      }
    }
    this.historyCheckedAt = performance.now();
  }

  /**
   * A backlog is deleted in as few statements as keep each one short: the batch doubles while full cuts take less
   * than CUT_TARGET_MS and halves when one takes four times that, between RETENTION_BATCH_SIZE and 64 times it.
   */
  private pace(elapsedMs: number, deleted: number): void {
    const least = this.settings.batchSize;
    if (elapsedMs > CUT_TARGET_MS * 4) this.batch = Math.max(least, Math.floor(this.batch / 2));
    else if (elapsedMs < CUT_TARGET_MS && deleted >= this.batch / 2) {
      this.batch = Math.min(least * MAX_BATCH_GROWTH, this.batch * 2);
    }
  }

  /** Due seconds per tenant found (null: only work with no time of its own, due since the first round that found it). */
  private noteDue(found: Array<number | null>): void {
    const now = performance.now();
    let oldest = Number.POSITIVE_INFINITY;
    let untimed = false;
    for (const seconds of found) {
      if (seconds === null) untimed = true;
      else oldest = Math.min(oldest, now - seconds * 1000);
    }
    this.untimedSince = untimed ? (this.untimedSince ?? now) : undefined;
    oldest = Math.min(oldest, this.untimedSince ?? Number.POSITIVE_INFINITY);
    this.dueSince = Number.isFinite(oldest) ? oldest : undefined;
  }

  private count(outcome: RetentionRound, reason: RetentionReason, deleted: number): void {
    outcome.deleted[reason] += deleted;
    if (deleted > 0) this.metrics.retentionDeleted.inc({ reason }, deleted);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.round = this.runOnce()
        .catch((error: unknown) => this.logger.warn(`A retention round failed: ${errorMessage(error)}`))
        .finally(() => {
          this.round = undefined;
          // A round that ran out of time goes on at once: the interval is for finding new work, not a pause in it.
          this.schedule(this.behind ? 0 : this.settings.intervalMs);
        });
    }, delayMs);
    this.timer.unref();
  }
}
