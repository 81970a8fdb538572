import { Injectable } from '@nestjs/common';
import { queueDepth } from '../consumer-groups/counters';
import { nothing, raw, sql, Statement, statement } from '../database/statement';

export interface QueueDepth {
  tenant: string | null;
  queue: string;
  messages: number;
}

export interface GroupLag extends QueueDepth {
  group: string;
}

export interface DeadRows {
  table: string;
  rows: number;
}

/** The tenant label, or NULL when metrics carry none. */
const tenantOf = (tenantLabels: boolean) => raw(tenantLabels ? 'q.tenant_id::text' : 'NULL::text');

/** The operator's numbers: these span tenants on purpose. */
@Injectable()
export class MetricsRepository {
  /** For the rest of the transaction. */
  statementTimeout(ms: number): Statement<void> {
    return statement(sql`SET LOCAL statement_timeout = ${raw(String(ms))}`, nothing);
  }

  /**
   * From the counters the writes keep (src/consumer-groups/counters.ts): a few rows per group and queue, however
   * many partitions there are. The `limit` most behind.
   */
  groupLags(tenantLabels: boolean, limit: number): Statement<GroupLag[]> {
    return statement(
      sql`SELECT ${tenantOf(tenantLabels)} AS tenant, q.name AS queue, l.consumer_group, sum(l.lag) AS messages
             FROM group_lag l
             JOIN queues q ON q.tenant_id = l.tenant_id AND q.id = l.queue_id
            WHERE EXISTS (SELECT 1 FROM consumer_groups g
                           WHERE g.tenant_id = l.tenant_id AND g.queue_id = l.queue_id AND g.name = l.consumer_group)
            GROUP BY 1, 2, 3
            ORDER BY 4 DESC, 2, 3
            LIMIT ${limit}`,
      (rows: Array<{ tenant: string | null; queue: string; consumer_group: string; messages: string }>) =>
        rows.map((row) => ({
          tenant: row.tenant,
          queue: row.queue,
          group: row.consumer_group,
          messages: Number(row.messages),
        })),
    );
  }

  /** The furthest-behind group's lag; with no group, every message the queue stores. The `limit` deepest. */
  queueDepths(tenantLabels: boolean, limit: number): Statement<QueueDepth[]> {
    return statement(
      sql`SELECT ${tenantOf(tenantLabels)} AS tenant, q.name AS queue, ${raw(queueDepth('q'))} AS messages
           FROM queues q
          ORDER BY 3 DESC, 2
          LIMIT ${limit}`,
      (rows: Array<{ tenant: string | null; queue: string; messages: string }>) =>
        rows.map((row) => ({ tenant: row.tenant, queue: row.queue, messages: Number(row.messages) })),
    );
  }

  deadRows(): Statement<DeadRows[]> {
    return statement(
      sql`SELECT relname AS table, n_dead_tup AS rows FROM pg_stat_user_tables
          WHERE relname IN ('messages', 'dead_letters', 'consumers', 'partitions') ORDER BY relname`,
      (rows: Array<{ table: string; rows: string }>) =>
        rows.map((row) => ({ table: row.table, rows: Number(row.rows) })),
    );
  }
}
