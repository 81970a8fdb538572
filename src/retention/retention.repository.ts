import { Injectable } from '@nestjs/common';
import { nothing, raw, Shared, shared, Sql, sql, Statement, statement } from '../database/statement';
import { claimableNow, readyAfter } from '../consumer-groups/cursor-ready';
import { subscriptionStartOffset } from '../consumer-groups/subscription-start';
import { storedBytes, usageChangeCte } from '../limits/stored-usage.repository';
import { groupLagCte, queueStoredCte } from '../consumer-groups/counters';
import { RetentionRow, retentionColumns, StoredRetention, storedRetentionOf } from './retention-policy';
import { keepsDeadLetters } from '../queues/keeps-dead-letters';
import type { TenantCursorWork } from '../wakeup/parked-polls';

export interface DuePartition {
  tenantId: string;
  partitionId: string;
  deadLetterQueue: boolean;
  retention: StoredRetention;
}

/** One partition's rules, in seconds; null turns a rule off. */
export interface PartitionRules {
  tenantId: string;
  partitionId: string;
  pendingSeconds: number | null;
  evictSeconds: number | null;
  completedSeconds: number | null;
  letters: boolean;
  /** Remove the partition once it keeps nothing, this long after its last push; null: never. */
  graceSeconds: number | null;
}

export interface Trimmed {
  completed: number;
  retention: number;
  evicted: number;
  lettered: number;
  partitions: number;
}

/** A version-7 UUID made by PostgreSQL: the clock's milliseconds over a random v4, with its version bits set to 7. */
const UUID_V7 = sql`encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                   PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                   FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid`;

/** The advisory lock keys of partitions being cut: the first key spaces them apart from other advisory locks. */
const RETENTION_LOCK_SPACE = 73_460_021;

/** PostgreSQL has no skip scan: walking tenant by tenant keeps each lookup in one tenant's rows, as sharding wants. */
const TENANTS = sql`tenants(tenant_id) AS (
    SELECT (SELECT tenant_id FROM queues ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT q.tenant_id FROM queues q WHERE q.tenant_id > t.tenant_id ORDER BY q.tenant_id LIMIT 1)
      FROM tenants t
     WHERE t.tenant_id IS NOT NULL
  )`;

/** The shortest dead-letter retention of any queue, or the default (0 keeps them): nothing younger can go. */
const shortestDeadLetterRetention = (defaultSeconds: Shared<number>): Sql => sql`shortest AS (
    SELECT min(s) AS seconds FROM (
      SELECT NULLIF(${defaultSeconds}::int, 0) AS s
      UNION ALL SELECT min(dlq_retention_seconds) FROM queues WHERE dlq_retention_seconds > 0) x
  )`;

function rulesCte(rules: PartitionRules[]): Sql {
  const column = <K extends keyof PartitionRules>(key: K): Array<PartitionRules[K]> => rules.map((rule) => rule[key]);
  return sql`rules AS (
    SELECT * FROM unnest(${column('tenantId')}::uuid[], ${column('partitionId')}::uuid[], ${column('pendingSeconds')}::int[], ${column('evictSeconds')}::int[], ${column('completedSeconds')}::int[], ${column('letters')}::boolean[], ${column('graceSeconds')}::int[])
      AS t(tenant_id, partition_id, pending_s, evict_s, completed_s, letters, grace_s)
  )`;
}

const ago = (seconds: string | Sql): Sql =>
  sql`clock_timestamp() - make_interval(secs => ${typeof seconds === 'string' ? raw(seconds) : seconds})`;

/**
 * Pending retention and eviction move every cursor below the cut past it, so they need every cursor of the partition:
 * one whose cursors someone holds is left for the next round, and the cut never reaches a message under a live lease.
 */
const trimSql = (rules: PartitionRules[], window: number, evictedError: string): Sql => sql`
  WITH ${rulesCte(rules)}, trimming AS (
    -- Only partitions whose oldest message is past pending retention or eviction have cursors to move.
    SELECT r.tenant_id, r.partition_id FROM rules r
     CROSS JOIN LATERAL (SELECT m.created_at FROM messages m
                          WHERE m.tenant_id = r.tenant_id AND m.partition_id = r.partition_id
                          ORDER BY m.seq LIMIT 1) f
     WHERE f.created_at < ${ago('r.pending_s')} OR f.created_at < ${ago('r.evict_s')}
  ), locked AS (
    SELECT c.tenant_id, c.partition_id, c.consumer_group, c.committed_offset,
           COALESCE(c.lease_expires_at > clock_timestamp(), false) AS leased
      FROM consumers c
      JOIN trimming t ON c.tenant_id = t.tenant_id AND c.partition_id = t.partition_id
     ORDER BY c.tenant_id, c.partition_id, c.consumer_group
       FOR UPDATE OF c SKIP LOCKED
  ), state AS (
    SELECT r.*, a.cursors, a.slowest,
           (SELECT count(*) FROM locked l WHERE l.tenant_id = r.tenant_id AND l.partition_id = r.partition_id) AS held,
           (SELECT min(l.committed_offset) FROM locked l
             WHERE l.tenant_id = r.tenant_id AND l.partition_id = r.partition_id AND l.leased) AS leased_from
      FROM rules r
     CROSS JOIN LATERAL (SELECT count(*) AS cursors, min(c.committed_offset) AS slowest FROM consumers c
                          WHERE c.tenant_id = r.tenant_id AND c.partition_id = r.partition_id) a
  ), oldest AS (
    SELECT s.tenant_id, s.partition_id, o.seq, o.created_at
      FROM state s
     CROSS JOIN LATERAL (SELECT m.seq, m.created_at FROM messages m
                          WHERE m.tenant_id = s.tenant_id AND m.partition_id = s.partition_id
                          ORDER BY m.seq LIMIT ${window}) o
  ), cut AS (
    SELECT s.tenant_id, s.partition_id, s.letters, x.*,
           GREATEST(x.pending_upto, x.evict_upto) AS trim_upto,
           GREATEST(x.pending_upto, x.evict_upto, x.completed_upto) AS upto
      FROM state s
     CROSS JOIN LATERAL (
           SELECT max(o.seq) FILTER (WHERE s.held = s.cursors AND o.created_at < ${ago('s.pending_s')}
                                       AND (s.leased_from IS NULL OR o.seq <= s.leased_from)) AS pending_upto,
                  max(o.seq) FILTER (WHERE s.held = s.cursors AND o.created_at < ${ago('s.evict_s')}
                                       AND (s.leased_from IS NULL OR o.seq <= s.leased_from)) AS evict_upto,
                  max(o.seq) FILTER (WHERE o.created_at < ${ago('s.completed_s')} AND o.seq <= s.slowest)
                    AS completed_upto,
                  -- Every cut is among these: the cut is taken by key (= ANY), never as a range of the partition,
                  -- which statistics of partitions holding many messages made a scan of the whole table.
                  array_agg(o.seq) AS seqs
             FROM oldest o
            WHERE o.tenant_id = s.tenant_id AND o.partition_id = s.partition_id) x
  ), lettered AS (
    INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq, transaction_id,
                              trace_id, payload, payload_bytes, producer_sub, message_created_at, error_message,
                              retry_count, key_id)
    SELECT b.tenant_id, ${UUID_V7}, p.queue_id, m.partition_id, l.consumer_group, m.id, m.seq, m.transaction_id,
           m.trace_id, m.payload, ${raw(storedBytes('m'))}, m.producer_sub, m.created_at, ${evictedError}, 0, m.key_id
      FROM cut b
      JOIN partitions p ON p.tenant_id = b.tenant_id AND p.id = b.partition_id
      JOIN locked l ON l.tenant_id = b.tenant_id AND l.partition_id = b.partition_id
                   AND l.committed_offset < b.evict_upto
      JOIN messages m ON m.tenant_id = b.tenant_id AND m.partition_id = b.partition_id AND m.seq = ANY(b.seqs)
                     AND m.seq > GREATEST(l.committed_offset, COALESCE(b.pending_upto, 0)) AND m.seq <= b.evict_upto
     WHERE b.letters
    RETURNING tenant_id, payload_bytes
  ), advanced AS (
    UPDATE consumers c
       SET committed_offset = b.trim_upto, delivered_offset = GREATEST(c.delivered_offset, b.trim_upto), retry_count = 0,
           ready = ${raw(readyAfter('c', 'b.trim_upto'))}
      FROM cut b
     WHERE c.tenant_id = b.tenant_id AND c.partition_id = b.partition_id AND c.committed_offset < b.trim_upto
    RETURNING c.tenant_id, c.queue_id, c.consumer_group, c.partition_id, b.trim_upto
  ), gone AS (
    DELETE FROM messages m USING cut b
     WHERE m.tenant_id = b.tenant_id AND m.partition_id = b.partition_id AND m.seq = ANY(b.seqs) AND m.seq <= b.upto
    RETURNING m.tenant_id, m.partition_id, m.seq, ${raw(storedBytes('m'))} AS bytes
  ), ${raw(
    // The counters in the reverse of the order they run in, as the push's store writes them (STORED_AND_LAG_OF_GROWN).
    usageChangeCte(
      'counted',
      `SELECT tenant_id, -bytes AS bytes, -1 AS messages FROM gone
     UNION ALL SELECT tenant_id, payload_bytes, 1 FROM lettered`,
    ),
  )}, ${raw(
    queueStoredCte(
      'stored_counted',
      `SELECT p.tenant_id, p.queue_id, -g.messages AS messages, 0 AS partitions, 0 AS offsets
       FROM (SELECT tenant_id, partition_id, count(*) AS messages FROM gone GROUP BY tenant_id, partition_id) g
       JOIN partitions p ON p.tenant_id = g.tenant_id AND p.id = g.partition_id`,
    ),
  )}, ${raw(
    groupLagCte(
      'lag_counted',
      // Every cursor of a trimmed partition is locked (held = cursors), so locked has where each stood.
      `SELECT a.tenant_id, a.queue_id, a.consumer_group, l.committed_offset - a.trim_upto AS lag
       FROM advanced a
       JOIN locked l ON l.tenant_id = a.tenant_id AND l.partition_id = a.partition_id
                    AND l.consumer_group = a.consumer_group`,
    ),
  )}
  SELECT b.partition_id,
         count(g.seq) FILTER (WHERE g.seq <= COALESCE(b.completed_upto, 0))::int AS completed,
         count(g.seq) FILTER (WHERE g.seq > COALESCE(b.completed_upto, 0) AND g.seq > COALESCE(b.pending_upto, 0))::int
           AS evicted,
         count(g.seq) FILTER (WHERE g.seq > COALESCE(b.completed_upto, 0)
                                AND g.seq <= COALESCE(b.pending_upto, 0))::int AS retention,
         (SELECT count(*) FROM lettered)::int AS lettered
    FROM cut b
    LEFT JOIN gone g ON g.tenant_id = b.tenant_id AND g.partition_id = b.partition_id
   GROUP BY b.partition_id`;

/**
 * Holds the partitions in id order as a push does: an UPDATE alone takes them in whatever order its join yields, and
 * deadlocked with pushes. No look sooner than pollMs: a partition may be of age and wait for a lease or lock.
 * The statement reads messages as of its start, but the lock may come after a push that waited for it committed: a
 * partition whose offset under the lock is not the one the snapshot read (`stale`) is neither removed nor scheduled
 * from that view; it is looked at again at once.
 *
 * Completed retention counts only once every cursor is past the oldest message: until then it waits for a cursor to
 * move, which the moved-cursor index reports, and not for a timer. Each cursor is marked seen at the offset this
 * statement's snapshot read (`observed`), so one that moved meanwhile stays reported; a cursor someone holds is left
 * unmarked and looked at again.
 */
const scheduleSql = (rules: PartitionRules[], pollMs: number, hurried: string[]): Sql => sql`
  WITH ${rulesCte(rules)}, hurried AS (
    SELECT unnest(${hurried}::uuid[]) AS partition_id
  ), held AS MATERIALIZED (
    SELECT p.tenant_id, p.id, p.last_offset FROM partitions p
      JOIN rules r ON p.tenant_id = r.tenant_id AND p.id = r.partition_id
     ORDER BY p.id
       FOR NO KEY UPDATE OF p
  ), observed AS MATERIALIZED (
    SELECT c.tenant_id, c.partition_id, c.consumer_group, c.committed_offset, c.retention_seen FROM consumers c
      JOIN rules r ON c.tenant_id = r.tenant_id AND c.partition_id = r.partition_id
  ), first AS (
    SELECT r.*, f.seq, f.created_at, a.slowest,
           EXISTS (SELECT 1 FROM consumers c WHERE c.tenant_id = r.tenant_id AND c.partition_id = r.partition_id
                      AND c.lease_expires_at > clock_timestamp()) AS leased,
           h.last_offset IS DISTINCT FROM (SELECT s.last_offset FROM partitions s
                                            WHERE s.tenant_id = r.tenant_id AND s.id = r.partition_id) AS stale
      FROM rules r
      JOIN held h ON h.tenant_id = r.tenant_id AND h.id = r.partition_id
      LEFT JOIN LATERAL (SELECT m.seq, m.created_at FROM messages m
                          WHERE m.tenant_id = r.tenant_id AND m.partition_id = r.partition_id
                          ORDER BY m.seq LIMIT 1) f ON true
     CROSS JOIN LATERAL (SELECT min(o.committed_offset) AS slowest FROM observed o
                          WHERE o.tenant_id = r.tenant_id AND o.partition_id = r.partition_id) a
  ), removed AS (
    DELETE FROM partitions p USING first f
     WHERE p.tenant_id = f.tenant_id AND p.id = f.partition_id AND f.seq IS NULL AND NOT f.leased AND NOT f.stale
       AND p.last_pushed_at < ${ago('f.grace_s')}
    RETURNING p.tenant_id, p.id, p.queue_id, p.last_offset
  ), ${raw(
    queueStoredCte(
      'partitions_counted',
      'SELECT tenant_id, queue_id, 0 AS messages, -1 AS partitions, -last_offset AS offsets FROM removed',
    ),
  )}, ${raw(
    groupLagCte(
      'lag_counted',
      // Its cursors go with it: what they counted past their offsets (messages deleted one by one) goes too.
      `SELECT c.tenant_id, c.queue_id, c.consumer_group, c.committed_offset - r.last_offset AS lag
       FROM removed r JOIN consumers c ON c.tenant_id = r.tenant_id AND c.partition_id = r.id`,
    ),
  )}, next AS (
    SELECT f.tenant_id, f.partition_id, f.seq,
           LEAST(f.created_at + make_interval(secs => f.pending_s),
                 f.created_at + make_interval(secs => f.evict_s),
                 CASE WHEN f.slowest >= f.seq THEN f.created_at + make_interval(secs => f.completed_s) END) AS of_age,
           f.grace_s, f.stale, EXISTS (SELECT 1 FROM hurried h WHERE h.partition_id = f.partition_id) AS hurry
      FROM first f
  ), scheduled AS (
    UPDATE partitions p
       SET retention_check_at =
             CASE WHEN n.stale THEN clock_timestamp()
                  WHEN n.seq IS NULL THEN p.last_pushed_at + make_interval(secs => n.grace_s)
                  WHEN n.hurry THEN clock_timestamp()
                  WHEN n.of_age IS NULL THEN NULL
                  ELSE GREATEST(n.of_age, clock_timestamp() + make_interval(secs => ${pollMs}::double precision / 1000))
             END
      FROM next n
     WHERE p.tenant_id = n.tenant_id AND p.id = n.partition_id
       AND NOT EXISTS (SELECT 1 FROM removed r WHERE r.tenant_id = p.tenant_id AND r.id = p.id)
  ), marking AS (
    SELECT c.tenant_id, c.partition_id, c.consumer_group FROM consumers c
      JOIN observed o ON o.tenant_id = c.tenant_id AND o.partition_id = c.partition_id
                     AND o.consumer_group = c.consumer_group AND o.committed_offset > o.retention_seen
     ORDER BY c.tenant_id, c.partition_id, c.consumer_group
       FOR NO KEY UPDATE OF c SKIP LOCKED
  ), marked AS (
    UPDATE consumers c SET retention_seen = o.committed_offset
      FROM marking k
      JOIN observed o ON o.tenant_id = k.tenant_id AND o.partition_id = k.partition_id
                     AND o.consumer_group = k.consumer_group
     WHERE c.tenant_id = k.tenant_id AND c.partition_id = k.partition_id AND c.consumer_group = k.consumer_group
  ), rechecked AS (
    DELETE FROM retention_rechecks x USING rules r
     WHERE x.tenant_id = r.tenant_id AND x.partition_id = r.partition_id
  ), claimable AS (
    SELECT c.tenant_id, q.name AS queue, c.consumer_group, p.name AS partition, p.last_offset - c.committed_offset AS messages
      FROM consumers c
      JOIN rules r ON c.tenant_id = r.tenant_id AND c.partition_id = r.partition_id
      JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
      JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
     WHERE ${raw(claimableNow('c', 'p'))}
  )
  SELECT (SELECT count(*) FROM removed)::int AS removed,
         (SELECT json_agg(json_build_object('tenantId', tenant_id, 'queue', queue, 'consumerGroup', consumer_group,
                                            'partition', partition, 'messages', messages))
            FROM claimable) AS claimable`;

export interface Scheduled {
  /** Partitions removed, empty past their grace. */
  removed: number;
  claimable: TenantCursorWork[];
}

interface TrimmedRow {
  partition_id: string;
  completed: number;
  evicted: number;
  retention: number;
  lettered: number;
}

@Injectable()
export class RetentionRepository {
  /**
   * One walk of the tenants, made once a round so that claims look at a few tenants each, not at all of them. Each
   * comes with how long its oldest due partition has been due (null: only moved cursors or rechecks, which carry no
   * time); a check of -infinity counts as due now.
   */
  /**
   * One batch of a queue's partitions whose retention settings changed, made due now, in name order from where the
   * last batch stopped; the queue's row is skipped while another broker takes the step. Partitions are locked in id
   * order, as a push locks them, skipping those held (they go to retention_rechecks). Undefined when no queue has a
   * recheck left.
   */
  spreadRechecks(limit: number, tenants: readonly string[] | undefined): Statement<{ partitions: number } | undefined> {
    const batch = shared(limit);
    const only = shared(tenants ?? null);
    return statement(
      sql`WITH q AS MATERIALIZED (
         SELECT tenant_id, id, retention_recheck_from AS after FROM queues
          WHERE retention_recheck_from IS NOT NULL AND (${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]))
          ORDER BY tenant_id, id
          LIMIT 1
            FOR UPDATE SKIP LOCKED
       ), batch AS MATERIALIZED (
         SELECT p.tenant_id, p.id, p.name FROM q
          CROSS JOIN LATERAL (SELECT p.tenant_id, p.id, p.name FROM partitions p
                               WHERE p.tenant_id = q.tenant_id AND p.queue_id = q.id AND p.name > q.after
                               ORDER BY p.name LIMIT ${batch}) p
       ), held AS MATERIALIZED (
         SELECT p.tenant_id, p.id FROM partitions p JOIN batch b ON b.tenant_id = p.tenant_id AND b.id = p.id
          ORDER BY p.id
            FOR NO KEY UPDATE OF p SKIP LOCKED
       ), due AS (
         -- Never later than it was: a look already due keeps the time it became due (the job's lag).
         UPDATE partitions p SET retention_check_at = LEAST(COALESCE(p.retention_check_at, 'infinity'), clock_timestamp())
           FROM held h
          WHERE p.tenant_id = h.tenant_id AND p.id = h.id
         RETURNING 1
       ), deferred AS (
         -- One a push or a cut holds now is left to the rechecks, which need no lock on it.
         INSERT INTO retention_rechecks (tenant_id, partition_id)
         SELECT b.tenant_id, b.id FROM batch b
          WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.tenant_id = b.tenant_id AND h.id = b.id)
         ON CONFLICT DO NOTHING
       ), advanced AS (
         UPDATE queues x
            SET retention_recheck_from = CASE WHEN (SELECT count(*) FROM batch) < ${batch} THEN NULL
                                              ELSE (SELECT max(b.name) FROM batch b) END
           FROM q
          WHERE x.tenant_id = q.tenant_id AND x.id = q.id
       )
       SELECT (SELECT count(*) FROM q)::int AS queues, (SELECT count(*) FROM due)::int AS partitions`,
      ([row]: Array<{ queues: number; partitions: number }>) =>
        row.queues > 0 ? { partitions: row.partitions } : undefined,
    );
  }

  tenantsWithDue(): Statement<Array<{ tenantId: string; dueSeconds: number | null }>> {
    return statement(
      sql`WITH RECURSIVE ${TENANTS}
       SELECT t.tenant_id,
              CASE WHEN isfinite(d.due_at) THEN extract(epoch FROM clock_timestamp() - d.due_at)::float8
                   WHEN d.due_at IS NOT NULL THEN 0 END AS due_seconds,
              EXISTS (SELECT 1 FROM consumers c
                       WHERE c.tenant_id = t.tenant_id AND c.committed_offset > c.retention_seen)
                OR EXISTS (SELECT 1 FROM retention_rechecks x WHERE x.tenant_id = t.tenant_id) AS moved
         FROM tenants t
        CROSS JOIN LATERAL (SELECT min(p.retention_check_at) AS due_at FROM partitions p
                             WHERE p.tenant_id = t.tenant_id AND p.retention_check_at <= clock_timestamp()) d
        WHERE t.tenant_id IS NOT NULL`,
      (rows: Array<{ tenant_id: string; due_seconds: number | null; moved: boolean }>) =>
        rows
          .filter((row) => row.due_seconds !== null || row.moved)
          .map((row) => ({ tenantId: row.tenant_id, dueSeconds: row.due_seconds })),
    );
  }

  /**
   * Advisory locks only: pushes hold their partitions' rows, and a claim skipping those would starve busy ones. Due
   * partitions come oldest check first; those found through a moved cursor or a recheck count as due now.
   */
  claimDue(limit: number, tenants: string[]): Statement<DuePartition[]> {
    const claim = shared(limit);
    const among = shared(tenants);
    return statement(
      sql`WITH found AS (
         SELECT d.* FROM unnest(${among}::uuid[]) AS t(tenant_id)
          CROSS JOIN LATERAL (
                SELECT p.tenant_id, p.id, p.retention_check_at AS due_at FROM partitions p
                 WHERE p.tenant_id = t.tenant_id AND p.retention_check_at <= clock_timestamp()
                 ORDER BY p.retention_check_at LIMIT ${claim}) d
         UNION ALL
         SELECT m.tenant_id, m.partition_id, clock_timestamp() FROM unnest(${among}::uuid[]) AS t(tenant_id)
          CROSS JOIN LATERAL (
                SELECT DISTINCT c.tenant_id, c.partition_id FROM consumers c
                 WHERE c.tenant_id = t.tenant_id AND c.committed_offset > c.retention_seen
                 ORDER BY c.tenant_id, c.partition_id LIMIT ${claim}) m
         UNION ALL
         SELECT x.tenant_id, x.partition_id, clock_timestamp() FROM unnest(${among}::uuid[]) AS t(tenant_id)
          CROSS JOIN LATERAL (
                SELECT x.tenant_id, x.partition_id FROM retention_rechecks x
                 WHERE x.tenant_id = t.tenant_id ORDER BY x.partition_id LIMIT ${claim}) x
       ), due AS (
         SELECT DISTINCT ON (f.tenant_id, f.id) f.tenant_id, f.id, p.queue_id, f.due_at
           FROM found f
           JOIN partitions p ON p.tenant_id = f.tenant_id AND p.id = f.id
          ORDER BY f.tenant_id, f.id, f.due_at
       ), orphans AS (
         -- Rechecks of partitions removed since: nothing left to look at.
         DELETE FROM retention_rechecks x USING found f
          WHERE x.tenant_id = f.tenant_id AND x.partition_id = f.id
            AND NOT EXISTS (SELECT 1 FROM partitions p WHERE p.tenant_id = f.tenant_id AND p.id = f.id)
       ), candidates AS (
         SELECT d.* FROM due d ORDER BY d.due_at LIMIT ${claim} * 4
       ), claimed AS (
         SELECT d.* FROM candidates d
          WHERE pg_try_advisory_xact_lock(${raw(String(RETENTION_LOCK_SPACE))}, hashtext(d.id::text))
          ORDER BY d.due_at
          LIMIT ${claim}
       )
       SELECT c.tenant_id, c.id AS partition_id, ${raw(keepsDeadLetters('q'))} AS dead_letter_queue,
              ${raw(retentionColumns('q'))}
         FROM claimed c
         JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id
        ORDER BY c.due_at`,
      (rows: Array<RetentionRow & { tenant_id: string; partition_id: string; dead_letter_queue: boolean }>) =>
        rows.map((row) => ({
          tenantId: row.tenant_id,
          partitionId: row.partition_id,
          deadLetterQueue: row.dead_letter_queue,
          retention: storedRetentionOf(row),
        })),
    );
  }

  /**
   * A group with no cursor on a partition has not read it only while it is still looking through its partitions
   * (backfill) and has not reached this one: it gets its cursor before the cut, so that the cut keeps what it has not
   * read, moves it past what expires, and dead-letters for it as for any other group.
   */
  cursorsForCut(rules: PartitionRules[]): Statement<void> {
    return statement(
      sql`WITH wanted AS MATERIALIZED (
         SELECT p.tenant_id, p.queue_id, p.id, p.last_offset, g.name, s.start_offset
           FROM unnest(${rules.map((rule) => rule.tenantId)}::uuid[], ${rules.map((rule) => rule.partitionId)}::uuid[]) AS r(tenant_id, partition_id)
           JOIN partitions p ON p.tenant_id = r.tenant_id AND p.id = r.partition_id
           JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id
                                 AND g.backfill_from IS NOT NULL AND p.name > g.backfill_from
          CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('p', 'g'))} AS start_offset) s
          WHERE s.start_offset < p.last_offset
       ), created AS (
         INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
         SELECT tenant_id, queue_id, id, name, start_offset, start_offset FROM wanted
          ORDER BY id, name
         ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
         RETURNING tenant_id, partition_id, consumer_group
       ), ${raw(
         groupLagCte(
           'lag_counted',
           `SELECT w.tenant_id, w.queue_id, w.name AS consumer_group, w.last_offset - w.start_offset AS lag
            FROM created c JOIN wanted w ON w.tenant_id = c.tenant_id AND w.id = c.partition_id AND w.name = c.consumer_group`,
         ),
       )}
       SELECT 1`,
      nothing,
    );
  }

  /** `full` names the partitions cut to the window. */
  trim(
    rules: PartitionRules[],
    window: number,
    evictedError: string,
  ): Statement<Omit<Trimmed, 'partitions'> & { full: string[] }> {
    return statement(trimSql(rules, window, evictedError), (rows: TrimmedRow[]) => {
      const sum = (key: 'completed' | 'evicted' | 'retention') => rows.reduce((total, row) => total + row[key], 0);
      return {
        completed: sum('completed'),
        evicted: sum('evicted'),
        retention: sum('retention'),
        lettered: rows[0]?.lettered ?? 0,
        full: rows
          .filter((row) => row.completed + row.evicted + row.retention >= window)
          .map((row) => row.partition_id),
      };
    });
  }

  /**
   * Schedules the partitions' next looks and removes those empty past their grace. `claimable`: cursors of theirs that
   * a claim could take now. A claim skips a cursor this round held (the cut, the marking), and a poll that found
   * nothing else parks, so the round wakes their groups once it has let go.
   */
  schedule(rules: PartitionRules[], pollMs: number, hurried: string[]): Statement<Scheduled> {
    return statement(
      scheduleSql(rules, pollMs, hurried),
      ([scheduled]: Array<{ removed: number; claimable: TenantCursorWork[] | null }>) => ({
        removed: scheduled.removed,
        claimable: scheduled.claimable ?? [],
      }),
    );
  }

  tenantsWithOldDeadLetters(defaultSeconds: number): Statement<string[]> {
    return statement(
      sql`WITH RECURSIVE ${TENANTS}, ${shortestDeadLetterRetention(shared(defaultSeconds))}
       SELECT t.tenant_id FROM tenants t
        WHERE t.tenant_id IS NOT NULL
          AND EXISTS (SELECT 1 FROM dead_letters d
                       WHERE d.tenant_id = t.tenant_id AND d.created_at < ${ago('(SELECT seconds FROM shortest)')})`,
      (rows: Array<{ tenant_id: string }>) => rows.map((row) => row.tenant_id),
    );
  }

  /** `defaultSeconds` applies to queues that set none; 0 keeps them. */
  deadLetters(
    defaultSeconds: number,
    limit: number,
    tenants: string[],
  ): Statement<{ deleted: number; tenants: string[] }> {
    const seconds = shared(defaultSeconds);
    const batch = shared(limit);
    return statement(
      sql`WITH ${shortestDeadLetterRetention(seconds)}, doomed AS (
         SELECT e.tenant_id, e.id FROM unnest(${tenants}::uuid[]) AS t(tenant_id)
          CROSS JOIN LATERAL (
                SELECT d.tenant_id, d.id, d.created_at FROM dead_letters d
                  JOIN queues q ON q.tenant_id = d.tenant_id AND q.id = d.queue_id
                 WHERE d.tenant_id = t.tenant_id AND d.created_at < ${ago('(SELECT seconds FROM shortest)')}
                   AND COALESCE(q.dlq_retention_seconds, ${seconds}) > 0
                   AND d.created_at < ${ago(sql`COALESCE(q.dlq_retention_seconds, ${seconds})`)}
                 ORDER BY d.created_at LIMIT ${batch}) e
          ORDER BY e.created_at
          LIMIT ${batch}
       ), gone AS (
         DELETE FROM dead_letters d USING doomed x WHERE d.tenant_id = x.tenant_id AND d.id = x.id
         RETURNING d.tenant_id, ${raw(storedBytes('d'))} AS bytes
       ), ${raw(usageChangeCte('counted', 'SELECT tenant_id, -bytes AS bytes, -1 AS messages FROM gone'))}
       SELECT count(*)::int AS deleted, array_agg(DISTINCT tenant_id) AS tenants FROM gone`,
      ([row]: Array<{ deleted: number; tenants: string[] | null }>) => ({
        deleted: row.deleted,
        tenants: row.tenants ?? [],
      }),
    );
  }
}
