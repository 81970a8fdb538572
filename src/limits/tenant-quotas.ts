import { ForbiddenException, Inject, Injectable } from '@nestjs/common';
import type { QueryConfig } from 'pg';
import { QueryFailedError } from '../database/query-failed-error';
import { APP_CONFIG, AppConfig, TenantQuotas as QuotaLimits } from '../config/app-config';
import { StatementReader, TransactionRunner } from '../database/transaction-runner';
import { MetricsService } from '../metrics/metrics.service';
import { COUNTED_TABLES, CountedQuota, QuotaCountsRepository } from './quota-counts.repository';
import {
  STORAGE_QUOTA_EXCEEDED,
  StorageLimits,
  StoredUsageRepository,
  UsageChange,
  UsageRecord,
} from './stored-usage.repository';

export type QuotaKind = keyof QuotaLimits;
export type { CountedQuota };
/** Quotas on what a tenant stores, kept as counters by the writes. */
export type StorageQuota = Exclude<QuotaKind, CountedQuota>;

const QUOTAS: Record<QuotaKind, { variable: string; most: (limit: number) => string }> = {
  queues: { variable: 'TENANT_MAX_QUEUES', most: (limit) => `have at most ${limit} queues` },
  partitions: { variable: 'TENANT_MAX_PARTITIONS', most: (limit) => `have at most ${limit} partitions` },
  consumerGroups: {
    variable: 'TENANT_MAX_CONSUMER_GROUPS',
    most: (limit) => `have at most ${limit} consumer groups`,
  },
  storedBytes: { variable: 'TENANT_MAX_STORED_BYTES', most: (limit) => `store at most ${limit} payload bytes` },
  storedMessages: { variable: 'TENANT_MAX_STORED_MESSAGES', most: (limit) => `store at most ${limit} messages` },
};

const STORAGE_QUOTAS: readonly StorageQuota[] = ['storedBytes', 'storedMessages'];

/** A count this fresh, plus what this process created since, is trusted when it stays under the quota. */
const RECOUNT_MS = 10_000;
/** A tenant found at its quota is refused without counting again for this long. */
const FULL_MS = 1_000;

interface Known {
  count: number;
  at: number;
}

/** One quota's use for the usage route; a counted quota that is off is not counted (null). */
export interface QuotaUse {
  quota: QuotaKind;
  variable: string;
  used: number | null;
  limit: number | null;
}

export function quotaRefusal(kind: QuotaKind, limit: number): string {
  const { variable, most } = QUOTAS[kind];
  return `quota exceeded: a tenant may ${most(limit)} (${variable})`;
}

/** For the API documentation: what a write that stores messages gets past a storage quota (at the defaults). */
export const STORAGE_QUOTA_REFUSALS = [
  {
    when: 'the tenant would store more than TENANT_MAX_STORED_BYTES',
    error: quotaRefusal('storedBytes', 10 * 1024 ** 3),
  },
  {
    when: 'the tenant would store more than TENANT_MAX_STORED_MESSAGES',
    error: quotaRefusal('storedMessages', 10_000_000),
  },
];

export class QuotaExceededException extends ForbiddenException {
  constructor(kind: QuotaKind, limit: number) {
    super({ error: quotaRefusal(kind, limit) });
  }
}

/**
 * Counted quotas are checked after the insert, in the creating transaction, so a refusal rolls it all back; storage
 * quotas by the statement that records the write, its last. Races: docs/limits.md.
 */
@Injectable()
export class TenantQuotas {
  private readonly limits: QuotaLimits;
  private readonly known = new Map<string, Known>();
  private readonly storageLimits: StorageLimits | undefined;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly metrics: MetricsService,
    private readonly stored: StoredUsageRepository,
    private readonly counts: QuotaCountsRepository,
    private readonly transactions: TransactionRunner,
  ) {
    this.limits = config.limits.quotas;
    const { storedBytes, storedMessages } = this.limits;
    this.storageLimits =
      storedBytes === 0 && storedMessages === 0 ? undefined : { bytes: storedBytes, messages: storedMessages };
  }

  /** `unit`: the creating write's, so the count sees what it created. */
  async admit(tenantId: string, kind: CountedQuota, created: number, unit: StatementReader): Promise<void> {
    const limit = this.limits[kind];
    if (created === 0 || limit === 0) return;
    const key = `${tenantId}\n${kind}`;
    const known = this.known.get(key);
    const now = performance.now();
    if (known && known.count + created <= limit && now - known.at < RECOUNT_MS) {
      known.count += created;
      return;
    }
    if (known && known.count >= limit && now - known.at < FULL_MS) this.refuse(kind, limit);
    const count = await unit.run(this.counts.count(tenantId, kind, limit + 1));
    if (count > limit) {
      this.remember(key, { count: count - created, at: now });
      this.refuse(kind, limit);
    }
    this.remember(key, { count, at: now });
  }

  forget(tenantId: string): void {
    for (const kind of Object.keys(QUOTAS)) this.known.delete(`${tenantId}\n${kind}`);
  }

  /**
   * Refuses at once, for a second after a refusal, a write that would not fit the usage found then: a tenant at its
   * quota does not make the database store and roll back each of its pushes. Deleting here ends that second early.
   */
  assertRoomToStore(tenantId: string, adding: UsageChange): void {
    const now = performance.now();
    for (const kind of STORAGE_QUOTAS) {
      const limit = this.limits[kind];
      const added = kind === 'storedBytes' ? adding.bytes : adding.messages;
      const known = this.known.get(`${tenantId}\n${kind}`);
      if (limit > 0 && added > 0 && known && now - known.at < FULL_MS && known.count + added > limit) {
        this.refuse(kind, limit);
      }
    }
  }

  /** What a write that changes what the tenant stores records; `held` when the storage quotas apply to it. */
  usageRecord(change: UsageChange, held: boolean): UsageRecord {
    return { change, limits: held ? this.storageLimits : undefined };
  }

  /** The statement recording it, when the write's own last statement does not. */
  usageStatement(tenantId: string, record: UsageRecord): QueryConfig {
    return this.stored.changeStatement(tenantId, record);
  }

  /** The refusal a failed usage statement stands for, counted and remembered; undefined for any other failure. */
  refusalOf(tenantId: string, error: unknown): QuotaExceededException | undefined {
    if (!(error instanceof QueryFailedError)) return undefined;
    const { code, message, detail } = error.driverError as { code?: string; message?: string; detail?: string };
    if (code !== STORAGE_QUOTA_EXCEEDED) return undefined;
    const kind = STORAGE_QUOTAS.find((quota) => message?.endsWith(`: ${quota}`)) ?? 'storedBytes';
    this.remember(`${tenantId}\n${kind}`, { count: Number(detail), at: performance.now() });
    this.metrics.quotaRefusals.inc({ quota: QUOTAS[kind].variable });
    return new QuotaExceededException(kind, this.limits[kind]);
  }

  forgetStored(tenantId: string): void {
    for (const kind of STORAGE_QUOTAS) this.known.delete(`${tenantId}\n${kind}`);
  }

  /** Each quota with what the tenant uses of it: counted up to one past the quota, stored usage from its counters. */
  usage(tenantId: string): Promise<QuotaUse[]> {
    return this.transactions.read(tenantId, async (reader) => {
      const uses: QuotaUse[] = [];
      for (const kind of Object.keys(COUNTED_TABLES) as CountedQuota[]) {
        const limit = this.limits[kind];
        const used = limit === 0 ? null : await reader.run(this.counts.count(tenantId, kind, limit + 1));
        uses.push({ quota: kind, variable: QUOTAS[kind].variable, used, limit: limit || null });
      }
      const stored = await reader.last(this.stored.usage(tenantId));
      for (const kind of STORAGE_QUOTAS) {
        const used = kind === 'storedBytes' ? stored.bytes : stored.messages;
        uses.push({ quota: kind, variable: QUOTAS[kind].variable, used, limit: this.limits[kind] || null });
      }
      return uses;
    });
  }

  private refuse(kind: QuotaKind, limit: number): never {
    this.metrics.quotaRefusals.inc({ quota: QUOTAS[kind].variable });
    throw new QuotaExceededException(kind, limit);
  }

  private remember(key: string, known: Known): void {
    this.known.delete(key);
    this.known.set(key, known);
    // Only tenants that created something lately need a count.
    if (this.known.size > 100_000) this.known.delete(this.known.keys().next().value!);
  }
}
