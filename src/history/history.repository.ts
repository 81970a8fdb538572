import { Injectable } from '@nestjs/common';
import { queueDepth } from '../consumer-groups/counters';
import { isoTimestamp } from '../common/sql-timestamp';
import { nothing, NO_SQL, raw, shared, Sql, sql, Statement, statement } from '../database/statement';

/** What one process counted for one queue in one minute. */
export interface MinuteCounts {
  tenantId: string;
  queue: string;
  /** The minute's start, epoch milliseconds. */
  minute: number;
  pushed: number;
  popped: number;
  acked: number;
  deadLettered: number;
  maxWaitMs: number | null;
}

/** One step of a series: the sums of its minutes, the longest wait, and (a queue's) the last depth written in it. */
export interface HistoryBucket {
  bucket: number;
  pushed: number;
  popped: number;
  acked: number;
  deadLettered: number;
  maxWaitMs: number | null;
  lag: number | null;
}

export interface HistorySeries {
  /** false: no such queue. */
  found: boolean;
  from: string;
  to: string;
  buckets: HistoryBucket[];
  /** A queue's last depth written before `from`: a quiet queue's depth is what it was at its last activity. */
  lagBefore: number | null;
}

/**
 * Counts of a flush, added to each queue's and each tenant's minute. The depth is read from the queue's counters
 * (src/consumer-groups/counters.ts), a few rows per queue, for the queues this flush names alone. A queue deleted
 * since its counts were taken is left out of its rows, not of its tenant's.
 */
function addHistorySql(counts: readonly MinuteCounts[]): Sql {
  const column = <T>(of: (c: MinuteCounts) => T): T[] => counts.map(of);
  return sql`
  WITH d AS (
    SELECT * FROM unnest(${column((c) => c.tenantId)}::uuid[], ${column((c) => c.queue)}::text[], ${column((c) => new Date(c.minute).toISOString())}::timestamptz[], ${column((c) => c.pushed)}::bigint[], ${column((c) => c.popped)}::bigint[], ${column((c) => c.acked)}::bigint[],
                         ${column((c) => c.deadLettered)}::bigint[], ${column((c) => c.maxWaitMs)}::bigint[])
             AS d(tenant_id, queue, minute, pushed, popped, acked, dead_lettered, max_wait_ms)
  ), by_queue AS (
    INSERT INTO queue_history AS h (tenant_id, queue_id, minute, pushed, popped, acked, dead_lettered, max_wait_ms, lag)
    SELECT d.tenant_id, q.id, d.minute, d.pushed, d.popped, d.acked, d.dead_lettered, d.max_wait_ms, ${raw(queueDepth('q'))}
      FROM d JOIN queues q ON q.tenant_id = d.tenant_id AND q.name = d.queue
     ORDER BY d.tenant_id, q.id, d.minute
    ON CONFLICT (tenant_id, queue_id, minute) DO UPDATE
       SET pushed = h.pushed + excluded.pushed, popped = h.popped + excluded.popped, acked = h.acked + excluded.acked,
           dead_lettered = h.dead_lettered + excluded.dead_lettered,
           max_wait_ms = GREATEST(h.max_wait_ms, excluded.max_wait_ms), lag = excluded.lag
    RETURNING 1
  ), by_tenant AS (
    INSERT INTO tenant_history AS h (tenant_id, minute, pushed, popped, acked, dead_lettered, max_wait_ms)
    SELECT tenant_id, minute, sum(pushed), sum(popped), sum(acked), sum(dead_lettered), max(max_wait_ms) FROM d
     GROUP BY tenant_id, minute
     ORDER BY tenant_id, minute
    ON CONFLICT (tenant_id, minute) DO UPDATE
       SET pushed = h.pushed + excluded.pushed, popped = h.popped + excluded.popped, acked = h.acked + excluded.acked,
           dead_lettered = h.dead_lettered + excluded.dead_lettered,
           max_wait_ms = GREATEST(h.max_wait_ms, excluded.max_wait_ms)
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM by_queue)::int AS queues, (SELECT count(*) FROM by_tenant)::int AS tenants`;
}

/** The span of a series: the last `rangeSeconds` up to the end of the current minute, by the database clock. */
const span = (rangeSeconds: number): Sql => sql`span AS (
    SELECT date_trunc('minute', now()) + interval '1 minute' - make_interval(secs => ${rangeSeconds}) AS since,
           date_trunc('minute', now()) + interval '1 minute' AS until
  )`;

/** A tenant's series, or with `queue` one of its queues'. */
function seriesSql(tenantId: string, queue: string | undefined, rangeSeconds: number, stepSeconds: number): Sql {
  const ofQueue = queue !== undefined;
  const table = raw(ofQueue ? 'queue_history' : 'tenant_history');
  const tenant = shared(tenantId);
  const owner = ofQueue
    ? sql`h.tenant_id = ${tenant} AND h.queue_id = (SELECT id FROM queue)`
    : sql`h.tenant_id = ${tenant}`;
  return sql`
    WITH ${span(rangeSeconds)}, ${ofQueue ? sql`queue AS (SELECT q.id FROM queues q WHERE q.tenant_id = ${tenant} AND q.name = ${queue}), ` : NO_SQL}buckets AS (
      SELECT floor(extract(epoch FROM h.minute - s.since) / ${stepSeconds})::int AS bucket, sum(h.pushed)::bigint AS pushed,
             sum(h.popped)::bigint AS popped, sum(h.acked)::bigint AS acked,
             sum(h.dead_lettered)::bigint AS dead_lettered, max(h.max_wait_ms) AS max_wait_ms,
             ${raw(ofQueue ? '(array_agg(h.lag ORDER BY h.minute DESC) FILTER (WHERE h.lag IS NOT NULL))[1]' : 'NULL::bigint')} AS lag
        FROM ${table} h, span s
       WHERE ${owner} AND h.minute >= s.since AND h.minute < s.until
       GROUP BY 1
    )
    SELECT ${raw(isoTimestamp('s.since'))} AS "from", ${raw(isoTimestamp('s.until'))} AS "to",
           ${
             ofQueue
               ? sql`(SELECT h.lag FROM queue_history h WHERE ${owner} AND h.minute < s.since AND h.lag IS NOT NULL
                    ORDER BY h.minute DESC LIMIT 1)`
               : raw('NULL::bigint')
           } AS lag_before,
           COALESCE((SELECT json_agg(b ORDER BY b.bucket) FROM buckets b), '[]'::json) AS buckets,
           ${raw(ofQueue ? 'EXISTS (SELECT 1 FROM queue)' : 'true')} AS found
      FROM span s`;
}

interface SeriesRow {
  found: boolean;
  from: string;
  to: string;
  lag_before: string | null;
  buckets: Array<{
    bucket: number;
    pushed: number | string;
    popped: number | string;
    acked: number | string;
    dead_lettered: number | string;
    max_wait_ms: number | string | null;
    lag: number | string | null;
  }>;
}

const numberOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));

@Injectable()
export class HistoryRepository {
  /** Run on no tenant's behalf: one statement for every tenant this process counted for. */
  add(counts: readonly MinuteCounts[]): Statement<void> {
    return statement(addHistorySql(counts), nothing);
  }

  queueSeries(tenantId: string, queue: string, rangeSeconds: number, stepSeconds: number): Statement<HistorySeries> {
    return statement(seriesSql(tenantId, queue, rangeSeconds, stepSeconds), seriesOf);
  }

  tenantSeries(tenantId: string, rangeSeconds: number, stepSeconds: number): Statement<HistorySeries> {
    return statement(seriesSql(tenantId, undefined, rangeSeconds, stepSeconds), seriesOf);
  }

  /**
   * Tenants with a bucket older than `days`: a walk of tenant_history's key, one probe per tenant (a tenant's queue
   * rows are never older than its own: both are written by the same statement).
   */
  tenantsWithOld(days: number): Statement<string[]> {
    return statement(
      sql`WITH RECURSIVE tenants(tenant_id) AS (
         SELECT (SELECT tenant_id FROM tenant_history ORDER BY tenant_id LIMIT 1)
         UNION ALL
         SELECT (SELECT h.tenant_id FROM tenant_history h WHERE h.tenant_id > t.tenant_id ORDER BY h.tenant_id LIMIT 1)
           FROM tenants t
          WHERE t.tenant_id IS NOT NULL
       )
       SELECT t.tenant_id FROM tenants t
        WHERE t.tenant_id IS NOT NULL
          AND EXISTS (SELECT 1 FROM tenant_history h
                       WHERE h.tenant_id = t.tenant_id AND h.minute < now() - make_interval(days => ${days}))`,
      (rows: Array<{ tenant_id: string }>) => rows.map((row) => row.tenant_id),
    );
  }

  /** Up to `limit` of the tenant's buckets older than `days`, its queues' first; the rows deleted. */
  deleteOld(tenantId: string, days: number, limit: number): Statement<number> {
    const tenant = shared(tenantId);
    const age = shared(days);
    const batch = shared(limit);
    return statement(
      sql`WITH queue_rows AS (
         DELETE FROM queue_history WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM queue_history
            WHERE tenant_id = ${tenant} AND minute < now() - make_interval(days => ${age}) LIMIT ${batch}))
         RETURNING 1
       ), tenant_rows AS (
         DELETE FROM tenant_history WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM tenant_history
            WHERE tenant_id = ${tenant} AND minute < now() - make_interval(days => ${age})
              AND (SELECT count(*) FROM queue_rows) < ${batch} LIMIT ${batch}))
         RETURNING 1
       )
       SELECT ((SELECT count(*) FROM queue_rows) + (SELECT count(*) FROM tenant_rows))::int AS deleted`,
      ([row]: Array<{ deleted: number }>) => row.deleted,
    );
  }
}

function seriesOf([row]: SeriesRow[]): HistorySeries {
  return {
    found: row.found,
    from: row.from,
    to: row.to,
    lagBefore: numberOrNull(row.lag_before),
    buckets: row.buckets.map((bucket) => ({
      bucket: bucket.bucket,
      pushed: Number(bucket.pushed),
      popped: Number(bucket.popped),
      acked: Number(bucket.acked),
      deadLettered: Number(bucket.dead_lettered),
      maxWaitMs: numberOrNull(bucket.max_wait_ms),
      lag: numberOrNull(bucket.lag),
    })),
  };
}
