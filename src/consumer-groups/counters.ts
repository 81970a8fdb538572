import { Sql, sql } from '../database/statement';

/**
 * A group's lag and a queue's stored messages, kept as counters by the statements that move cursors and store or
 * delete messages, so that metrics and listings read a few rows per queue instead of summing its partitions.
 *
 * - group_lag: for each group, the sum over its cursors of (partition's last offset - committed offset). A group
 *   that is still looking through its partitions (backfill_from set) counts only the cursors it has made so far.
 * - queue_stored: the messages rows of each queue, its partitions, and the sum of their last offsets.
 *
 * Each transaction adds to the stripe of its connection, as tenant_usage does, so that concurrent writers of one
 * queue rarely wait for each other's counter row, and rows are taken in key order so that two statements never take
 * them in opposite orders. Across tables too: group_lag, then queue_stored, then tenant_usage, in every transaction
 * (a statement writes their CTEs in the reverse order: PostgreSQL runs unread ones last-written first). A counter is
 * the sum of its stripes.
 */
export const COUNTER_STRIPES = 16;

const STRIPE = `(pg_backend_pid() % ${COUNTER_STRIPES})::smallint`;

/**
 * A CTE adding `changes` (a relation of tenant_id, queue_id, consumer_group, lag) to each group's lag. It reads the
 * whole relation before its first row, so it sees every row the statement's other CTEs return.
 */
export function groupLagCte(name: string, changes: string): string {
  return `${name} AS (
    INSERT INTO group_lag AS l (tenant_id, queue_id, consumer_group, stripe, lag)
    SELECT c.tenant_id, c.queue_id, c.consumer_group, ${STRIPE}, sum(c.lag) FROM (${changes}) c
     GROUP BY c.tenant_id, c.queue_id, c.consumer_group
    HAVING sum(c.lag) <> 0
     ORDER BY c.tenant_id, c.queue_id, c.consumer_group
    ON CONFLICT (tenant_id, queue_id, consumer_group, stripe) DO UPDATE SET lag = l.lag + excluded.lag
  )`;
}

/**
 * A CTE adding `changes` (a relation of tenant_id, queue_id, messages, partitions, offsets) to each queue's counters:
 * its stored messages, its partitions, and the sum of its partitions' last offsets (messages ever pushed to the
 * partitions it still has). One per statement: two inserts into the same row from one statement would fail.
 */
export function queueStoredCte(name: string, changes: string): string {
  return `${name} AS (
    INSERT INTO queue_stored AS s (tenant_id, queue_id, stripe, messages, partitions, offsets)
    SELECT c.tenant_id, c.queue_id, ${STRIPE}, sum(c.messages), sum(c.partitions), sum(c.offsets) FROM (${changes}) c
     GROUP BY c.tenant_id, c.queue_id
    HAVING sum(c.messages) <> 0 OR sum(c.partitions) <> 0 OR sum(c.offsets) <> 0
     ORDER BY c.tenant_id, c.queue_id
    ON CONFLICT (tenant_id, queue_id, stripe) DO UPDATE
       SET messages = s.messages + excluded.messages, partitions = s.partitions + excluded.partitions,
           offsets = s.offsets + excluded.offsets
  )`;
}

/**
 * A queue's depth (SQL over the queue row `queue`): the lag of its furthest-behind group, or, with no group, the
 * messages it stores. The depth metric, the listings and maxSize read it.
 */
export function queueDepth(queue: string): string {
  return `CASE WHEN EXISTS (SELECT 1 FROM consumer_groups dg WHERE dg.tenant_id = ${queue}.tenant_id AND dg.queue_id = ${queue}.id)
    THEN COALESCE((SELECT max(x.lag) FROM (
           SELECT sum(dl.lag) AS lag FROM group_lag dl
             JOIN consumer_groups dg ON dg.tenant_id = dl.tenant_id AND dg.queue_id = dl.queue_id AND dg.name = dl.consumer_group
            WHERE dl.tenant_id = ${queue}.tenant_id AND dl.queue_id = ${queue}.id
            GROUP BY dl.consumer_group) x), 0)
    ELSE COALESCE((SELECT sum(ds.messages) FROM queue_stored ds
                    WHERE ds.tenant_id = ${queue}.tenant_id AND ds.queue_id = ${queue}.id), 0)
  END`;
}

/** Each group's lag, summed over its stripes. */
export function groupLagOfQueues(tenantId: string, queueIds: string[]): Sql {
  return sql`SELECT queue_id, consumer_group, sum(lag)::bigint AS lag FROM group_lag
  WHERE tenant_id = ${tenantId} AND queue_id = ANY(${queueIds}::uuid[]) GROUP BY queue_id, consumer_group`;
}

export interface QueueStoredRow {
  queue_id: string;
  messages: string;
  partitions: string;
  offsets: string;
}

/** Each queue's counters, summed over its stripes. */
export function queueStoredOfQueues(tenantId: string, queueIds: string[]): Sql {
  return sql`SELECT queue_id, sum(messages)::bigint AS messages,
    sum(partitions)::bigint AS partitions, sum(offsets)::bigint AS offsets FROM queue_stored
  WHERE tenant_id = ${tenantId} AND queue_id = ANY(${queueIds}::uuid[]) GROUP BY queue_id`;
}
