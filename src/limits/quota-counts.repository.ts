import { Injectable } from '@nestjs/common';
import { raw, sql, Statement, statement } from '../database/statement';

/** Quotas on rows a request creates, counted when one is created. */
export type CountedQuota = 'queues' | 'partitions' | 'consumerGroups';

export const COUNTED_TABLES: Record<CountedQuota, string> = {
  queues: 'queues',
  partitions: 'partitions',
  consumerGroups: 'consumer_groups',
};

@Injectable()
export class QuotaCountsRepository {
  /** The tenant's rows of the kind, counted up to `most`: the count stops as soon as it says enough. */
  count(tenantId: string, kind: CountedQuota, most: number): Statement<number> {
    return statement(
      sql`SELECT count(*)::int AS n FROM (SELECT 1 FROM ${raw(COUNTED_TABLES[kind])} WHERE tenant_id = ${tenantId} LIMIT ${most}) s`,
      ([row]: Array<{ n: number }>) => row.n,
    );
  }
}
