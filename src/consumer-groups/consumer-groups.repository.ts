import { Injectable } from '@nestjs/common';
import { isoTimestamp } from '../common/sql-timestamp';
import { readyAfter } from './cursor-ready';
import { subscriptionStartOffset } from './subscription-start';
import { NO_SQL, nothing, raw, RawSql, shared, sql, Statement, statement } from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { groupLagCte, groupLagOfQueues, QueueStoredRow, queueStoredOfQueues } from './counters';

export interface GroupEntry {
  queueId: string;
  name: string;
  queueName: string;
  subscriptionFrom: string | null;
  createdAt: string;
}

/** What a group's listing entry sums over its partitions. */
export interface GroupTotals {
  partitionsWithLag: number;
  totalLag: number;
  maxTimeLag: number;
  liveLeases: number;
}

const NO_TOTALS: GroupTotals = { partitionsWithLag: 0, totalLag: 0, maxTimeLag: 0, liveLeases: 0 };

/** Where a lagging listing stands: among ready cursors by (queue, group, last move, partition), then among the
 * partitions groups still looking through have not reached, by (queue, group, partition name). */
export type LaggingPosition =
  | { walk: 'ready'; queueId: string; group: string; movedAt: string; partitionId: string }
  | { walk: 'backfill'; queueId: string; group: string; partition: string };

export const groupKey = (queueId: string, group: string): string => `${queueId}\n${group}`;

export interface GroupPartition {
  consumerGroup: string;
  queueName: string;
  partition: string;
  partitionId: string;
  cursor: number;
  offsetLag: number;
  timeLagSeconds: number;
  oldestUnconsumedAt: string | null;
  leaseActive: boolean;
  leaseExpiresAt: string | null;
  deliveryAttempt: number;
  retryCount: number;
}

export interface GroupQueue {
  queueName: string;
  subscriptionFrom: string | null;
  partitionCount: number;
}

export interface MovedCursor {
  queueName: string;
  partition: string;
  claimable: number;
}

interface GroupPartitionRow {
  consumer_group: string;
  queue_name: string;
  partition: string;
  partition_id: string;
  cursor: string;
  offset_lag: string;
  time_lag_seconds: string;
  oldest_unconsumed_at: string | null;
  lease_active: boolean;
  lease_expires_at: string | null;
  delivery_attempt: number;
  retry_count: number;
}

/** The group's position in partition `p`: its cursor, or where it would start; `o` is looked up, not assumed:
 * retention may have deleted the messages right after the cursor. */
const CURSOR_OR_START = `
  LEFT JOIN consumers c ON c.tenant_id = p.tenant_id AND c.partition_id = p.id AND c.consumer_group = g.name
  LEFT JOIN LATERAL (SELECT COALESCE(c.committed_offset, ${subscriptionStartOffset('p', 'g')}) AS cursor) s ON true
  LEFT JOIN LATERAL (
        SELECT m.seq, m.created_at FROM messages m
         WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id AND m.seq > s.cursor AND p.last_offset > s.cursor
         ORDER BY m.seq LIMIT 1) o ON true`;

/** The same past a cursor row `c` that exists. */
const PAST_CURSOR = `
  CROSS JOIN LATERAL (SELECT c.committed_offset AS cursor) s
  LEFT JOIN LATERAL (
        SELECT m.seq, m.created_at FROM messages m
         WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id AND m.seq > s.cursor AND p.last_offset > s.cursor
         ORDER BY m.seq LIMIT 1) o ON true`;

/** Ready cursors (or partitions) one lagging step looks at, at most: its work is bounded whatever the tenant holds. */
export const LAGGING_WALK = 2_000;

const NO_UUID = '00000000-0000-0000-0000-000000000000';

const OFFSET_LAG = 'COALESCE(p.last_offset - o.seq + 1, 0)';
const TIME_LAG = 'COALESCE(floor(EXTRACT(EPOCH FROM now() - o.created_at)), 0)';

const PARTITION_COLUMNS = `g.name AS consumer_group, q.name AS queue_name, p.name AS partition, p.id AS partition_id,
  s.cursor, ${OFFSET_LAG} AS offset_lag, ${TIME_LAG} AS time_lag_seconds,
  ${isoTimestamp('o.created_at')} AS oldest_unconsumed_at,
  COALESCE(c.lease_expires_at > now(), false) AS lease_active,
  CASE WHEN c.lease_expires_at > now() THEN ${isoTimestamp('c.lease_expires_at')} END AS lease_expires_at,
  COALESCE(c.delivery_attempt, 0) AS delivery_attempt, COALESCE(c.retry_count, 0) AS retry_count`;

/**
 * Partitions a group still looking through has not reached that its totals count, at most: past them, what it has
 * not reached is found as it goes. Unbounded, this read the whole queue per such group (500 at 100,000 partitions).
 */
const UNREACHED_COUNTED = 2_000;

/**
 * Each group's totals on these queues, keyed by groupKey: the one place they are computed. Its lag comes from the
 * group_lag counters, plus, for a group still looking through its partitions, what lies in the first
 * UNREACHED_COUNTED of those it has not reached (the counters count only cursors made). The rest looks at ready cursors only, since only they can have anything
 * left to read: the work grows with the partitions where groups have work, not with the queue.
 */
export async function groupTotals(
  reader: StatementReader,
  tenantId: string,
  queueIds: string[],
): Promise<Map<string, GroupTotals>> {
  const totals = new Map<string, GroupTotals>();
  if (queueIds.length === 0) return totals;
  const add = (queueId: string, group: string, more: Partial<GroupTotals>): void => {
    const key = groupKey(queueId, group);
    const sum = totals.get(key) ?? NO_TOTALS;
    totals.set(key, {
      partitionsWithLag: sum.partitionsWithLag + (more.partitionsWithLag ?? 0),
      totalLag: sum.totalLag + (more.totalLag ?? 0),
      maxTimeLag: Math.max(sum.maxTimeLag, more.maxTimeLag ?? 0),
      liveLeases: sum.liveLeases + (more.liveLeases ?? 0),
    });
  };
  const lags = await reader.run(
    statement(
      groupLagOfQueues(tenantId, queueIds),
      (rows: Array<{ queue_id: string; consumer_group: string; lag: string }>) => rows,
    ),
  );
  for (const row of lags) add(row.queue_id, row.consumer_group, { totalLag: Number(row.lag) });
  const [tenant, queues] = [shared(tenantId), shared(queueIds)];
  const rows = await reader.run(
    statement(
      // Groups that start alike (most do) share one look at the partitions none has reached: each group then costs a
      // probe of its cursors there, not the look. Per group, the look was most of the statement (72 ms of 90 at 10
      // groups); OFFSET 0 keeps the planner from computing the starting point twice.
      sql`WITH starts AS MATERIALIZED (
       SELECT DISTINCT g.tenant_id, g.queue_id, g.backfill_from, g.subscription_from FROM consumer_groups g
        WHERE g.tenant_id = ${tenant} AND g.queue_id = ANY(${queues}::uuid[]) AND g.backfill_from IS NOT NULL
     ), unreached AS MATERIALIZED (
       SELECT g.queue_id, g.backfill_from, g.subscription_from, p.tenant_id, p.id, p.last_offset, s.start, o.seq,
              o.created_at
         FROM starts g
        CROSS JOIN LATERAL (SELECT p.* FROM partitions p
                             WHERE p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id AND p.name > g.backfill_from
                             ORDER BY p.name LIMIT ${raw(String(UNREACHED_COUNTED))}) p
        CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('p', 'g'))} AS start OFFSET 0) s
         LEFT JOIN LATERAL (
               SELECT m.seq, m.created_at FROM messages m
                WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id AND m.seq > s.start AND p.last_offset > s.start
                ORDER BY m.seq LIMIT 1) o ON true
     )
     SELECT g.queue_id, g.name, count(o.seq)::int AS partitions_with_lag, 0 AS backfill_lag,
            COALESCE(max(${raw(TIME_LAG)}), 0) AS max_time_lag,
            count(*) FILTER (WHERE c.lease_expires_at > now())::int AS live_leases
       FROM consumer_groups g
       JOIN consumers c ON c.tenant_id = g.tenant_id AND c.queue_id = g.queue_id AND c.consumer_group = g.name
                       AND c.ready
       -- From the cursor alone: joining each cursor's partition row cost as much as the rest of the statement.
       LEFT JOIN LATERAL (
             SELECT m.seq, m.created_at FROM messages m
              WHERE m.tenant_id = c.tenant_id AND m.partition_id = c.partition_id AND m.seq > c.committed_offset
              ORDER BY m.seq LIMIT 1) o ON true
      WHERE g.tenant_id = ${tenant} AND g.queue_id = ANY(${queues}::uuid[])
      GROUP BY g.queue_id, g.name
     UNION ALL
     SELECT g.queue_id, g.name, count(o.seq)::int, COALESCE(sum(o.last_offset - o.start), 0),
            COALESCE(max(${raw(TIME_LAG)}), 0), 0
       FROM consumer_groups g
       JOIN unreached o ON o.queue_id = g.queue_id AND o.backfill_from = g.backfill_from
                       AND o.subscription_from IS NOT DISTINCT FROM g.subscription_from
      WHERE g.tenant_id = ${tenant} AND g.queue_id = ANY(${queues}::uuid[]) AND g.backfill_from IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM consumers c
                         WHERE c.tenant_id = o.tenant_id AND c.partition_id = o.id AND c.consumer_group = g.name)
      GROUP BY g.queue_id, g.name`,
      (
        found: Array<{
          queue_id: string;
          name: string;
          partitions_with_lag: number;
          backfill_lag: string;
          max_time_lag: string;
          live_leases: number;
        }>,
      ) => found,
    ),
  );
  for (const row of rows) {
    add(row.queue_id, row.name, {
      partitionsWithLag: row.partitions_with_lag,
      totalLag: Number(row.backfill_lag),
      maxTimeLag: Number(row.max_time_lag),
      liveLeases: row.live_leases,
    });
  }
  return totals;
}

@Injectable()
export class ConsumerGroupsRepository {
  /** By queue then group name, after (queue name, group name); one more than `limit` tells whether there are more. */
  entries(
    tenantId: string,
    queueName: string | undefined,
    after: [string, string] | undefined,
    limit: number,
  ): Statement<GroupEntry[]> {
    const [queue, afterQueue] = [shared(queueName ?? null), shared(after?.[0] ?? null)];
    return statement(
      sql`SELECT g.queue_id, g.name, q.name AS queue_name, ${raw(isoTimestamp('g.subscription_from'))} AS subscription_from,
              ${raw(isoTimestamp('g.created_at'))} AS created_at
         FROM queues q
         JOIN consumer_groups g ON g.tenant_id = q.tenant_id AND g.queue_id = q.id
        WHERE q.tenant_id = ${tenantId} AND (${queue}::text IS NULL OR q.name = ${queue})
          AND (${afterQueue}::text IS NULL OR (q.name, g.name) > (${afterQueue}::text, ${after?.[1] ?? null}::text))
        ORDER BY q.name, g.name
        LIMIT ${limit + 1}`,
      (
        rows: Array<{
          queue_id: string;
          name: string;
          queue_name: string;
          subscription_from: string | null;
          created_at: string;
        }>,
      ) =>
        rows.map((row) => ({
          queueId: row.queue_id,
          name: row.name,
          queueName: row.queue_name,
          subscriptionFrom: row.subscription_from,
          createdAt: row.created_at,
        })),
    );
  }

  groupTotals(reader: StatementReader, tenantId: string, queueIds: string[]): Promise<Map<string, GroupTotals>> {
    return groupTotals(reader, tenantId, queueIds);
  }

  /** Totals of a group with no entry in groupTotals's answer: nothing to read anywhere. */
  static totalsOf(totals: Map<string, GroupTotals>, queueId: string, group: string): GroupTotals {
    return totals.get(groupKey(queueId, group)) ?? NO_TOTALS;
  }

  /** Each queue's partition count, from the queue_stored counters: counting the partitions read the whole queue. */
  async partitionCounts(reader: StatementReader, tenantId: string, queueIds: string[]): Promise<Map<string, number>> {
    if (queueIds.length === 0) return new Map();
    return reader.run(
      statement(
        queueStoredOfQueues(tenantId, queueIds),
        (rows: QueueStoredRow[]) => new Map(rows.map((row) => [row.queue_id, Number(row.partitions)])),
      ),
    );
  }

  /**
   * One step of the lagging listing: at most `walk` cursors or partitions looked at, from `from`. Ready cursors first
   * (only they can have something left to read), by when they last moved; then, for groups still looking through
   * their partitions, those not reached yet, by name. Answers the lagging entries found, in walk order, and where the
   * next step starts (undefined: the walk is over).
   */
  laggingStep(
    tenantId: string,
    minLagSeconds: number,
    from: LaggingPosition | undefined,
    walk: number,
  ): Statement<{ found: Array<GroupPartition & { position: LaggingPosition }>; next: LaggingPosition | undefined }> {
    if (from === undefined || from.walk === 'ready') {
      const after =
        from === undefined
          ? NO_SQL
          : sql`AND (w.queue_id, w.consumer_group, w.updated_at, w.partition_id) > (${from.queueId}::uuid, ${from.group}::text, ${from.movedAt}::timestamptz, ${from.partitionId}::uuid)`;
      return statement(
        sql`SELECT ${raw(PARTITION_COLUMNS)}, c.queue_id, ${raw(isoTimestamp('c.updated_at'))} AS moved_at,
                  COALESCE(o.created_at <= now() - make_interval(secs => ${minLagSeconds}), false) AS lagging
             FROM (SELECT w.* FROM consumers w
                    WHERE w.tenant_id = ${tenantId} AND w.ready ${after}
                    ORDER BY w.queue_id, w.consumer_group, w.updated_at, w.partition_id
                    LIMIT ${walk}) c
             JOIN consumer_groups g ON g.tenant_id = c.tenant_id AND g.queue_id = c.queue_id AND g.name = c.consumer_group
             JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id
             JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
             ${raw(PAST_CURSOR)}
            ORDER BY c.queue_id, c.consumer_group, c.updated_at, c.partition_id`,
        (rows: Array<GroupPartitionRow & { queue_id: string; moved_at: string; lagging: boolean }>) => {
          const positioned = rows.map((row) => ({
            row,
            position: {
              walk: 'ready' as const,
              queueId: row.queue_id,
              group: row.consumer_group,
              movedAt: row.moved_at,
              partitionId: row.partition_id,
            },
          }));
          const found = positioned
            .filter(({ row }) => row.lagging)
            .map(({ row, position }) => ({ ...toGroupPartition(row), position }));
          if (rows.length === walk) return { found, next: positioned[positioned.length - 1].position };
          return { found, next: { walk: 'backfill', queueId: NO_UUID, group: '', partition: '' } };
        },
      );
    }
    // Groups still looking through their partitions: those it has not reached have no cursor yet.
    const [most, queue, group] = [walk, from.queueId, from.group].map(shared);
    return statement(
      sql`SELECT ${raw(PARTITION_COLUMNS)}, g.queue_id, c.partition_id IS NOT NULL AS has_cursor,
                COALESCE(o.created_at <= now() - make_interval(secs => ${minLagSeconds}), false) AS lagging
           FROM consumer_groups g
           JOIN queues q ON q.tenant_id = g.tenant_id AND q.id = g.queue_id
           JOIN LATERAL (
                SELECT p.* FROM partitions p
                 WHERE p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id
                   AND p.name > CASE WHEN (g.queue_id, g.name) = (${queue}::uuid, ${group}::text)
                                     THEN GREATEST(g.backfill_from, ${from.partition}::text) ELSE g.backfill_from END
                 ORDER BY p.name LIMIT ${most}) p ON true
           ${raw(CURSOR_OR_START)}
          WHERE g.tenant_id = ${tenantId} AND g.backfill_from IS NOT NULL AND (g.queue_id, g.name) >= (${queue}::uuid, ${group}::text)
          ORDER BY g.queue_id, g.name, p.name
          LIMIT ${most}`,
      (rows: Array<GroupPartitionRow & { queue_id: string; has_cursor: boolean; lagging: boolean }>) => {
        const found = rows
          .filter((row) => row.lagging && !row.has_cursor)
          .map((row) => ({
            ...toGroupPartition(row),
            position: { walk: 'backfill', queueId: row.queue_id, group: row.consumer_group, partition: row.partition },
          })) as Array<GroupPartition & { position: LaggingPosition }>;
        if (rows.length < walk) return { found, next: undefined };
        const last = rows[rows.length - 1];
        return {
          found,
          next: { walk: 'backfill', queueId: last.queue_id, group: last.consumer_group, partition: last.partition },
        };
      },
    );
  }

  queuesOf(
    tenantId: string,
    group: string,
    queueName: string | undefined,
    after: string | undefined,
  ): Statement<Array<Omit<GroupQueue, 'partitionCount'> & { queueId: string }>> {
    const [queue, from] = [shared(queueName ?? null), shared(after ?? null)];
    return statement(
      sql`SELECT q.id AS queue_id, q.name AS queue_name, ${raw(isoTimestamp('g.subscription_from'))} AS subscription_from
           FROM consumer_groups g
           JOIN queues q ON q.tenant_id = g.tenant_id AND q.id = g.queue_id
          WHERE g.tenant_id = ${tenantId} AND g.name = ${group} AND (${queue}::text IS NULL OR q.name = ${queue})
            AND (${from}::text IS NULL OR q.name >= ${from})
          ORDER BY q.name`,
      (rows: Array<{ queue_id: string; queue_name: string; subscription_from: string | null }>) =>
        rows.map((row) => ({
          queueId: row.queue_id,
          queueName: row.queue_name,
          subscriptionFrom: row.subscription_from,
        })),
    );
  }

  /** A page of one queue's partitions by name, after `after`, with the group's position in each. */
  partitionsOf(
    tenantId: string,
    group: string,
    queueId: string,
    after: string | undefined,
    limit: number,
  ): Statement<GroupPartition[]> {
    const from = shared(after ?? null);
    return statement(
      sql`SELECT ${raw(PARTITION_COLUMNS)}
         FROM consumer_groups g
         JOIN queues q ON q.tenant_id = g.tenant_id AND q.id = g.queue_id
         JOIN LATERAL (
              SELECT p.* FROM partitions p
               WHERE p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id AND (${from}::text IS NULL OR p.name > ${from})
               ORDER BY p.name LIMIT ${limit}) p ON true
         ${raw(CURSOR_OR_START)}
        WHERE g.tenant_id = ${tenantId} AND g.name = ${group} AND g.queue_id = ${queueId}
        ORDER BY p.name`,
      (rows: GroupPartitionRow[]) => rows.map(toGroupPartition),
    );
  }

  groupExists(tenantId: string, queueId: string, group: string): Statement<boolean> {
    return statement(
      sql`SELECT 1 FROM consumer_groups WHERE tenant_id = ${tenantId} AND queue_id = ${queueId} AND name = ${group}`,
      (rows: unknown[]) => rows.length > 0,
    );
  }

  /** In primary-key order, as acks and renewals take them. */
  private lockCursors(
    tenantId: string,
    queueId: string,
    group: string,
    partitionId: string | undefined,
  ): Statement<void> {
    const partition = shared(partitionId ?? null);
    return statement(
      sql`SELECT 1 FROM consumers
        WHERE tenant_id = ${tenantId} AND queue_id = ${queueId} AND consumer_group = ${group} AND (${partition}::uuid IS NULL OR partition_id = ${partition})
        ORDER BY tenant_id, partition_id, consumer_group
          FOR UPDATE`,
      nothing,
    );
  }

  /**
   * Epochs advance so old holders' acks fail; timestamps never decrease along offsets, so time finds the boundary. The
   * group's cursors move, and for the whole queue so does its starting point, which places it in every partition it
   * has no cursor on: work that grows with the partitions the group has read, not with the queue. A move back in
   * time looks through the partitions again (backfill) for cursors to make where there is something to read.
   */
  async seek(
    unit: StatementReader,
    tenantId: string,
    queue: { id: string; name: string },
    group: string,
    partitionId: string | undefined,
    timestamp: string | undefined,
  ): Promise<{ moved: MovedCursor[]; partitions: number }> {
    if (partitionId !== undefined) {
      await unit.run(
        statement(
          sql`WITH created AS (
           INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
           SELECT p.tenant_id, p.queue_id, p.id, g.name, s.start_offset, s.start_offset
             FROM partitions p
             JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id AND g.name = ${group}
            CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('p', 'g'))} AS start_offset) s
            WHERE p.tenant_id = ${tenantId} AND p.queue_id = ${queue.id} AND p.id = ${partitionId}
           ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
           RETURNING tenant_id, queue_id, consumer_group, partition_id, committed_offset
         ), ${raw(
           groupLagCte(
             'lag_counted',
             `SELECT c.tenant_id, c.queue_id, c.consumer_group, p.last_offset - c.committed_offset AS lag
              FROM created c JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id`,
           ),
         )}
         SELECT 1`,
          nothing,
        ),
      );
    }
    await unit.run(this.lockCursors(tenantId, queue.id, group, partitionId));
    const [tenant, queueId, name, partition, at] = [
      tenantId,
      queue.id,
      group,
      partitionId ?? null,
      timestamp ?? null,
    ].map(shared);
    const rows = await unit.run(
      statement(
        sql`WITH target AS (
         SELECT c.partition_id, p.name AS partition, p.last_offset, c.committed_offset AS committed_before,
                CASE WHEN ${at}::timestamptz IS NULL THEN p.last_offset
                     ELSE GREATEST(
                            COALESCE((SELECT min(m.seq) - 1 FROM messages m
                                       WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id), p.last_offset),
                            COALESCE((SELECT max(m.seq) FROM messages m
                                       WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id
                                         AND m.created_at < ${at}::timestamptz), 0))
                END AS offset
           FROM consumers c
           JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
          WHERE c.tenant_id = ${tenant} AND c.queue_id = ${queueId} AND c.consumer_group = ${name} AND (${partition}::uuid IS NULL OR c.partition_id = ${partition})
       ), moved AS (
         UPDATE consumers c
          SET committed_offset = t.offset, delivered_offset = t.offset,
              lease_id = NULL, lease_expires_at = NULL, lease_end_offset = NULL, lease_deadline = NULL,
              lease_epoch = c.lease_epoch + 1, retry_count = 0, delivery_attempt = 0, updated_at = now(),
              ready = ${raw(readyAfter('c', 't.offset'))}
         FROM target t
        WHERE c.tenant_id = ${tenant} AND c.partition_id = t.partition_id AND c.consumer_group = ${name}
       RETURNING t.partition, t.last_offset, c.committed_offset, c.tenant_id, c.queue_id, c.consumer_group,
                 t.committed_before - c.committed_offset AS lag
       ), ${raw(groupLagCte('lag_counted', 'SELECT tenant_id, queue_id, consumer_group, lag FROM moved'))}, started AS (
         UPDATE consumer_groups g
            SET subscription_from = COALESCE(${at}::timestamptz, clock_timestamp()),
                backfill_from = CASE WHEN ${at}::timestamptz IS NULL THEN NULL ELSE '' END
          WHERE g.tenant_id = ${tenant} AND g.queue_id = ${queueId} AND g.name = ${name} AND ${partition}::uuid IS NULL
       )
       SELECT partition, last_offset, committed_offset FROM moved`,
        (found: Array<{ partition: string; last_offset: string; committed_offset: string }>) => found,
      ),
    );
    const partitions =
      partitionId === undefined
        ? await unit.run(
            statement(
              sql`SELECT count(*)::int AS partitions FROM partitions WHERE tenant_id = ${tenantId} AND queue_id = ${queue.id}`,
              ([row]: Array<{ partitions: number }>) => row.partitions,
            ),
          )
        : 1;
    return {
      moved: rows.map((row) => ({
        queueName: queue.name,
        partition: row.partition,
        claimable: Number(row.last_offset) - Number(row.committed_offset),
      })),
      partitions,
    };
  }

  /**
   * Cursors are locked first in primary-key order, as acks and renewals lock them; then the queue rows, so no push
   * creating a partition adds a cursor for the group meanwhile. Cursors that appeared between the two (a pop
   * re-creating the group) are locked NOWAIT: an ack holding one waits for the queue row to write a dead letter, and
   * waiting for it would deadlock. Throws LockNotAvailable then; the caller tries again.
   */
  async delete(
    unit: StatementReader,
    tenantId: string,
    group: string,
    queueName: string | undefined,
  ): Promise<{ moved: MovedCursor[]; partitions: number }> {
    const [tenant, name, queue] = [tenantId, group, queueName ?? null].map(shared);
    const lockCursors = (wait: RawSql) =>
      statement(
        sql`SELECT 1 FROM consumers c
         JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id
        WHERE c.tenant_id = ${tenant} AND c.consumer_group = ${name} AND (${queue}::text IS NULL OR q.name = ${queue})
        ORDER BY c.tenant_id, c.partition_id, c.consumer_group
          FOR UPDATE OF c${wait}`,
        nothing,
      );
    await unit.run(lockCursors(NO_SQL));
    await unit.run(
      statement(
        sql`SELECT 1 FROM queues q
        WHERE q.tenant_id = ${tenant} AND (${queue}::text IS NULL OR q.name = ${queue})
          AND EXISTS (SELECT 1 FROM consumer_groups g WHERE g.tenant_id = q.tenant_id AND g.queue_id = q.id AND g.name = ${name})
        ORDER BY q.id
          FOR UPDATE OF q`,
        nothing,
      ),
    );
    await unit.run(lockCursors(raw(' NOWAIT')));
    return unit.run(
      statement(
        sql`WITH counted AS (
         SELECT count(p.id)::int AS partitions FROM consumer_groups g
           JOIN queues q ON q.tenant_id = g.tenant_id AND q.id = g.queue_id
           JOIN partitions p ON p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id
          WHERE g.tenant_id = ${tenant} AND g.name = ${name} AND (${queue}::text IS NULL OR q.name = ${queue})
       ), gone AS (
         DELETE FROM consumers c
          USING partitions p, queues q
          WHERE c.tenant_id = ${tenant} AND c.consumer_group = ${name}
            AND p.tenant_id = c.tenant_id AND p.id = c.partition_id
            AND q.tenant_id = p.tenant_id AND q.id = p.queue_id AND (${queue}::text IS NULL OR q.name = ${queue})
         RETURNING q.name AS queue_name, p.name AS partition, p.last_offset, c.partition_id
       ), rechecks AS (
         -- The cursors left may now all be past messages this group held back: no cursor moved to say so.
         INSERT INTO retention_rechecks (tenant_id, partition_id)
         SELECT ${tenant}, g.partition_id FROM gone g ORDER BY g.partition_id
         ON CONFLICT DO NOTHING
       ), groups AS (
         DELETE FROM consumer_groups g
          USING queues q
          WHERE g.tenant_id = ${tenant} AND g.name = ${name} AND q.tenant_id = g.tenant_id AND q.id = g.queue_id
            AND (${queue}::text IS NULL OR q.name = ${queue})
       ), lag_gone AS (
         DELETE FROM group_lag l
          USING queues q
          WHERE l.tenant_id = ${tenant} AND l.consumer_group = ${name} AND q.tenant_id = l.tenant_id AND q.id = l.queue_id
            AND (${queue}::text IS NULL OR q.name = ${queue})
       )
       -- One row at least, for the count: a group with no cursor left is forgotten all the same.
       SELECT g.queue_name, g.partition, g.last_offset, c.partitions
         FROM counted c LEFT JOIN gone g ON true`,
        (rows: Array<{ queue_name: string | null; partition: string; last_offset: string; partitions: number }>) => ({
          moved: rows
            .filter((row) => row.queue_name !== null)
            .map((row) => ({
              queueName: row.queue_name!,
              partition: row.partition,
              claimable: Number(row.last_offset),
            })),
          partitions: rows[0]?.partitions ?? 0,
        }),
      ),
    );
  }
}

function toGroupPartition(row: GroupPartitionRow): GroupPartition {
  return {
    consumerGroup: row.consumer_group,
    queueName: row.queue_name,
    partition: row.partition,
    partitionId: row.partition_id,
    cursor: Number(row.cursor),
    offsetLag: Number(row.offset_lag),
    timeLagSeconds: Number(row.time_lag_seconds),
    oldestUnconsumedAt: row.oldest_unconsumed_at,
    leaseActive: row.lease_active,
    leaseExpiresAt: row.lease_expires_at,
    deliveryAttempt: row.delivery_attempt,
    retryCount: row.retry_count,
  };
}
