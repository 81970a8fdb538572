import { ForbiddenException, Inject, Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { APP_CONFIG, AppConfig, TenantQuotas as QuotaLimits } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';

export type QuotaKind = keyof QuotaLimits;

const QUOTAS: Record<QuotaKind, { table: string; variable: string; noun: string }> = {
  queues: { table: 'queues', variable: 'TENANT_MAX_QUEUES', noun: 'queues' },
  partitions: { table: 'partitions', variable: 'TENANT_MAX_PARTITIONS', noun: 'partitions' },
  consumerGroups: { table: 'consumer_groups', variable: 'TENANT_MAX_CONSUMER_GROUPS', noun: 'consumer groups' },
};

/** A count this fresh, plus what this process created since, is trusted when it stays under the quota. */
const RECOUNT_MS = 10_000;
/** A tenant found at its quota is refused without counting again for this long. */
const FULL_MS = 1_000;

interface Known {
  count: number;
  at: number;
}

export class QuotaExceededException extends ForbiddenException {
  constructor(kind: QuotaKind, limit: number) {
    const { variable, noun } = QUOTAS[kind];
    super({ error: `quota exceeded: a tenant may have at most ${limit} ${noun} (${variable})` });
  }
}

/** Checked after the insert, in the creating transaction, so a refusal rolls it all back; races: docs/limits.md. */
@Injectable()
export class TenantQuotas {
  private readonly limits: QuotaLimits;
  private readonly known = new Map<string, Known>();

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly metrics: MetricsService,
  ) {
    this.limits = config.limits.quotas;
  }

  async admit(tenantId: string, kind: QuotaKind, created: number, manager: EntityManager): Promise<void> {
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
    const count = await this.count(tenantId, kind, limit, manager);
    if (count > limit) {
      this.remember(key, { count: count - created, at: now });
      this.refuse(kind, limit);
    }
    this.remember(key, { count, at: now });
  }

  forget(tenantId: string): void {
    for (const kind of Object.keys(QUOTAS)) this.known.delete(`${tenantId}\n${kind}`);
  }

  private refuse(kind: QuotaKind, limit: number): never {
    this.metrics.quotaRefusals.inc({ quota: QUOTAS[kind].variable });
    throw new QuotaExceededException(kind, limit);
  }

  private async count(tenantId: string, kind: QuotaKind, limit: number, manager: EntityManager): Promise<number> {
    const [row]: Array<{ n: number }> = await manager.query(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${QUOTAS[kind].table} WHERE tenant_id = $1 LIMIT $2) s`,
      [tenantId, limit + 1],
    );
    return row.n;
  }

  private remember(key: string, known: Known): void {
    this.known.delete(key);
    this.known.set(key, known);
    // Only tenants that created something lately need a count.
    if (this.known.size > 100_000) this.known.delete(this.known.keys().next().value!);
  }
}
