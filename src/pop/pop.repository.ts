import { Injectable } from '@nestjs/common';
import { isoTimestamp } from '../common/sql-timestamp';
import { readyAfter } from '../consumer-groups/cursor-ready';
import { subscriptionStartOffset } from '../consumer-groups/subscription-start';
import { groupLagCte } from '../consumer-groups/counters';
import {
  nothing,
  NO_SQL,
  planAsAny,
  prepared,
  raw,
  shared,
  Sql,
  sql,
  Statement,
  statement,
} from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { PayloadCipher } from '../encryption/payload-cipher';
import { STORED_MESSAGE_COLUMNS, storedMessage, StoredMessageRow, WireMessage } from '../message/message-shape';

/** Keys, ids, timestamps, punctuation and a claimedPartitions entry: what a message adds besides payload and names. */
export const MESSAGE_ENVELOPE_BYTES = 560;

export interface ClaimRequest {
  queueId: string;
  partitionId: string | undefined;
  consumerGroup: string;
  leaseId: string;
  leaseSeconds: number;
  /**
   * The queue's lease time as the claim was planned with, which leaseSeconds comes from unless the pop asked for its
   * own: with delayedProcessing, windowBuffer and retryDelayMs, what the claim holds the queue to (a queue configured
   * since claims nothing).
   */
  leaseTime: number;
  /** Messages in total across the claimed partitions. */
  batch: number;
  maxPartitions: number;
  autoAck: boolean;
  /** The answer's size in bytes, roughly: messages past it are left for the next pop (at least one is taken). */
  maxBytes: number;
  /**
   * The longest the lease may run from its claim, renewals included (LEASE_MAX_TOTAL_SECONDS); undefined for no
   * ceiling.
   */
  maxTotalSeconds?: number | undefined;
  delayedProcessing: number;
  windowBuffer: number;
  /** The queue's retryDelay in milliseconds: a batch handed back by a nack or an expiry waits this long. */
  retryDelayMs: number;
}

export interface ClaimedMessage extends WireMessage {
  /** Claimed back from a lease that expired unrenewed (not released by a nack). */
  leaseLost: boolean;
  /** Its offset in the partition. */
  seq: number;
  /** The partition's cursor as the claim left it: committed up to afterOffset, leased through throughOffset. */
  afterOffset: number;
  throughOffset: number;
}

/** Creation time of the partition `p`'s newest message (windowBuffer). */
const NEWEST_CREATED_AT = `(SELECT m.created_at FROM messages m
                             WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id AND m.seq = p.last_offset)`;
/** Creation time of the first message past the cursor `c` (delayedProcessing). */
const NEXT_CREATED_AT = `(SELECT m.created_at FROM messages m
                           WHERE m.tenant_id = c.tenant_id AND m.partition_id = c.partition_id AND m.seq > c.committed_offset
                           ORDER BY m.seq LIMIT 1)`;

/**
 * A prepared claim per shape of request: a filter that does not apply is left out rather than switched off by a
 * parameter, and the partition limit is hidden from the planner (a subquery), so a generic plan is estimated as the
 * custom one is and PostgreSQL keeps it instead of planning every pop (docs/internals.md, "Plans without fresh
 * statistics").
 */
function claimName(request: ClaimRequest): string {
  return `leasehold_claim${request.partitionId === undefined ? '' : '_partition'}${
    request.windowBuffer > 0 ? '_window' : ''
  }${request.delayedProcessing > 0 ? '_delayed' : ''}`;
}

/**
 * The claim: one statement, by the clock read once at the claim. Why each part is there: docs/internals.md. The group
 * is its third parameter, as the docs say.
 */
function claimSql(tenantId: string, request: ClaimRequest): Sql {
  // Keys hidden from the planner (planAsAny): it then estimates a small queue's claim as the generic plan does.
  const tenant = planAsAny(shared(tenantId), 'uuid');
  const queueId = planAsAny(shared(request.queueId), 'uuid');
  const group = shared(request.consumerGroup);
  const groupKey = planAsAny(group, 'text');
  const partition = planAsAny(shared(request.partitionId ?? null), 'uuid');
  const batch = shared(request.batch);
  const autoAck = shared(request.autoAck);
  const maxTotalSeconds = shared(request.maxTotalSeconds ?? null);
  const delayed = shared(request.delayedProcessing);
  const window = shared(request.windowBuffer);
  const retryDelay = shared(request.retryDelayMs);
  const { maxPartitions, leaseId, leaseSeconds, maxBytes } = request;
  // The queue as the claim was planned: a pop may plan from what it read before (PopService), so this holds it to that.
  const planned = sql`EXISTS (SELECT 1 FROM queues q
                   WHERE q.tenant_id = ${tenant} AND q.id = ${queueId} AND q.lease_time = ${request.leaseTime}::int
                     AND q.delayed_processing = ${delayed}::int AND q.window_buffer = ${window}::int
                     AND q.retry_delay_ms = ${retryDelay}::int)`;
  return sql`
  WITH clock AS (
    SELECT clock_timestamp() AS now
  ), candidates AS (
    SELECT c.partition_id, c.consumer_group, c.committed_offset, c.delivered_offset, c.updated_at, p.name AS partition,
           p.last_offset,
           c.lease_id AS ended_lease_id
      FROM consumers c
      JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
     WHERE c.tenant_id = ${tenant} AND c.queue_id = ${queueId} AND c.consumer_group = ${groupKey} AND c.ready
       AND ${planned}
       ${request.partitionId === undefined ? NO_SQL : sql`AND c.partition_id = ${partition}`}
       AND p.last_offset > c.committed_offset
       AND (c.lease_expires_at IS NULL
            OR c.lease_expires_at + ${retryDelay}::int * interval '1 ms' <= (SELECT now FROM clock))
       AND (c.retry_at IS NULL OR c.retry_at <= (SELECT now FROM clock))
       ${
         request.windowBuffer > 0
           ? sql`AND COALESCE(${raw(NEWEST_CREATED_AT)}, '-infinity') <= (SELECT now FROM clock) - make_interval(secs => ${window})`
           : NO_SQL
       }
       ${
         request.delayedProcessing > 0
           ? sql`AND (c.committed_offset < c.delivered_offset
                 OR COALESCE(${raw(NEXT_CREATED_AT)}, '-infinity') <= (SELECT now FROM clock) - make_interval(secs => ${delayed}))`
           : NO_SQL
       }
     ORDER BY c.updated_at, c.partition_id
     LIMIT (SELECT ${maxPartitions}::int)
       FOR UPDATE OF c SKIP LOCKED
  ), spans AS (
    SELECT k.*, r.redelivery, e.span_end, LEAST(e.span_end - k.committed_offset, ${batch}) AS available,
           row_number() OVER (ORDER BY k.updated_at, k.partition_id) AS claim_order
      FROM candidates k
     -- A span handed out before is handed out again alone, unless every message in it was deleted since.
     CROSS JOIN LATERAL (
           SELECT k.committed_offset < k.delivered_offset
                  AND EXISTS (SELECT 1 FROM messages m
                               WHERE m.tenant_id = ${tenant} AND m.partition_id = k.partition_id
                                 AND m.seq > k.committed_offset AND m.seq <= k.delivered_offset) AS redelivery) r
     CROSS JOIN LATERAL (
           SELECT CASE WHEN r.redelivery THEN k.delivered_offset
                       ${
                         request.delayedProcessing > 0
                           ? sql`-- Delayed: up to the last message due (none when none is; past the cursor when none is kept).
                       ELSE COALESCE((SELECT max(m.seq) FROM messages m
                                       WHERE m.tenant_id = ${tenant} AND m.partition_id = k.partition_id
                                         AND m.seq > k.committed_offset AND m.seq <= k.last_offset
                                         AND m.created_at <= (SELECT now FROM clock) - make_interval(secs => ${delayed})),
                                     CASE WHEN EXISTS (SELECT 1 FROM messages m
                                                        WHERE m.tenant_id = ${tenant} AND m.partition_id = k.partition_id
                                                          AND m.seq > k.committed_offset)
                                          THEN k.committed_offset ELSE k.last_offset END)`
                           : sql`ELSE k.last_offset`
                       }
                  END AS span_end) e
  ), sized AS (
    SELECT s.*, LEAST(s.available, ${batch} - (sum(s.available) OVER (ORDER BY s.claim_order) - s.available))::bigint AS take
      FROM spans s
  ), measured AS (
    SELECT z.partition_id, m.seq,
           sum(coalesce(m.payload_bytes, octet_length(m.payload::text)) + octet_length(m.transaction_id)
               + coalesce(octet_length(m.trace_id), 0) + coalesce(octet_length(m.producer_sub), 0)
               + 2 * octet_length(z.partition) + octet_length(${group}) + ${raw(String(MESSAGE_ENVELOPE_BYTES))})
             OVER (ORDER BY z.claim_order, m.seq) AS answer_bytes,
           row_number() OVER (ORDER BY z.claim_order, m.seq) AS position
      FROM sized z
     CROSS JOIN LATERAL (
           SELECT m.seq, m.payload_bytes, m.payload, m.transaction_id, m.trace_id, m.producer_sub
             FROM messages m
            WHERE m.tenant_id = ${tenant} AND m.partition_id = z.partition_id
              AND m.seq > z.committed_offset AND m.seq <= z.span_end
            ORDER BY m.seq
            LIMIT z.take
         ) m
     WHERE z.take > 0
  ), fitting AS (
    SELECT partition_id, max(seq) AS through_offset
      FROM measured
     WHERE answer_bytes <= ${maxBytes} OR position = 1
     GROUP BY partition_id
  ), emptied AS (
    -- Retention deleted what lay past this cursor: move it on, so the partition stops being a candidate.
    -- Both updates join on the locked row's group, not the group parameter: see "Plans without fresh statistics".
    UPDATE consumers c
       SET committed_offset = z.span_end, delivered_offset = GREATEST(c.delivered_offset, z.span_end), retry_count = 0,
           ready = ${raw(readyAfter('c', 'z.span_end'))}
      FROM sized z
     WHERE c.tenant_id = ${tenant} AND c.partition_id = z.partition_id AND c.consumer_group = z.consumer_group
       AND z.take > 0 AND NOT EXISTS (SELECT 1 FROM measured s WHERE s.partition_id = z.partition_id)
    RETURNING c.tenant_id, c.queue_id, c.consumer_group, z.committed_offset - z.span_end AS lag
  ), claimed AS (
    UPDATE consumers c
       SET lease_id = CASE WHEN ${autoAck} THEN NULL ELSE ${leaseId}::uuid END,
           lease_expires_at = CASE WHEN ${autoAck} THEN NULL ELSE (SELECT now FROM clock) + make_interval(secs => ${leaseSeconds}) END,
           lease_end_offset = CASE WHEN ${autoAck} THEN NULL ELSE f.through_offset END,
           committed_offset = CASE WHEN ${autoAck} THEN f.through_offset ELSE c.committed_offset END,
           retry_count = CASE WHEN ${autoAck} THEN 0 ELSE c.retry_count END,
           ready = CASE WHEN ${autoAck} THEN ${raw(readyAfter('c', 'f.through_offset'))} ELSE c.ready END,
           delivered_offset = GREATEST(c.delivered_offset, f.through_offset),
           delivery_attempt = CASE WHEN z.redelivery THEN c.delivery_attempt + 1 ELSE 1 END,
           lease_epoch = c.lease_epoch + 1,
           lease_renewals = 0, lease_renewed_at = NULL, lease_renewal_slack_ms = NULL,
           lease_deadline = CASE WHEN ${autoAck} OR ${maxTotalSeconds}::int IS NULL THEN NULL
                                 ELSE (SELECT now FROM clock) + make_interval(secs => ${maxTotalSeconds}) END,
           updated_at = now()
      FROM sized z
      JOIN fitting f ON f.partition_id = z.partition_id
     WHERE c.tenant_id = ${tenant} AND c.partition_id = z.partition_id AND c.consumer_group = z.consumer_group
    RETURNING c.partition_id, c.delivery_attempt, c.lease_epoch, z.partition, z.claim_order,
              z.committed_offset AS after_offset, f.through_offset,
              z.ended_lease_id IS NOT NULL AND z.redelivery AS lease_lost,
              c.tenant_id, c.queue_id, c.consumer_group,
              CASE WHEN ${autoAck} THEN z.committed_offset - f.through_offset ELSE 0 END AS lag
  ), ${raw(
    groupLagCte(
      'lag_counted',
      `SELECT tenant_id, queue_id, consumer_group, lag FROM emptied
     UNION ALL SELECT tenant_id, queue_id, consumer_group, lag FROM claimed`,
    ),
  )}
  SELECT ${raw(STORED_MESSAGE_COLUMNS)}, k.partition_id, k.partition, k.delivery_attempt, k.lease_lost, k.lease_epoch,
         m.seq, k.after_offset, k.through_offset
    FROM claimed k
    JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = k.partition_id
                   AND m.seq > k.after_offset AND m.seq <= k.through_offset
   ORDER BY k.claim_order, m.seq`;
}

export interface PopTarget {
  queueId: string;
  leaseTime: number;
  delayedProcessing: number;
  windowBuffer: number;
  retryDelayMs: number;
  partitionId: string | null;
  groupExists: boolean;
  /** The group has partitions left to look through for cursors (PopRepository.backfill). */
  backfilling: boolean;
  /** With a partition named: whether the group has a cursor there. */
  hasCursor: boolean;
}

@Injectable()
export class PopRepository {
  constructor(private readonly cipher: PayloadCipher) {}

  /** Everything a pop needs before claiming, in one round trip; undefined when the queue does not exist. */
  target(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    consumerGroup: string,
  ): Statement<PopTarget | undefined> {
    const group = shared(consumerGroup);
    return prepared(
      'leasehold_pop_target',
      sql`SELECT q.id, q.lease_time, q.delayed_processing, q.window_buffer, q.retry_delay_ms, p.id AS partition_id,
                g.name IS NOT NULL AS group_exists, g.backfill_from IS NOT NULL AS backfilling,
                p.id IS NOT NULL AND EXISTS (SELECT 1 FROM consumers c
                                              WHERE c.tenant_id = q.tenant_id AND c.partition_id = p.id
                                                AND c.consumer_group = ${group}) AS has_cursor
           FROM queues q
           LEFT JOIN partitions p ON p.tenant_id = q.tenant_id AND p.queue_id = q.id AND p.name = ${partition ?? null}
           LEFT JOIN consumer_groups g ON g.tenant_id = q.tenant_id AND g.queue_id = q.id AND g.name = ${group}
          WHERE q.tenant_id = ${tenantId} AND q.name = ${queue}`,
      ([row]: TargetRow[]) =>
        row && {
          queueId: row.id,
          leaseTime: row.lease_time,
          delayedProcessing: row.delayed_processing,
          windowBuffer: row.window_buffer,
          retryDelayMs: row.retry_delay_ms,
          partitionId: row.partition_id,
          groupExists: row.group_exists,
          backfilling: row.backfilling,
          hasCursor: row.has_cursor,
        },
    );
  }

  /**
   * The queue row is locked first: that waits for pushes in flight (they hold a key-share lock on it) and holds off
   * new ones until this commits, so a push either sees this group and gives it a cursor on its partitions, or ran
   * before and left messages the group finds by looking through the partitions (backfill). A group that starts now
   * (`new`) has nothing to find there; one reading from the beginning, or from an instant past, looks.
   */
  async ensureGroup(
    unit: StatementReader,
    tenantId: string,
    queueId: string,
    consumerGroup: string,
    startAt: { newOnly: boolean; from: string | undefined },
  ): Promise<boolean> {
    await unit.run(
      statement(sql`SELECT 1 FROM queues WHERE tenant_id = ${tenantId} AND id = ${queueId} FOR UPDATE`, nothing),
    );
    const from = shared(startAt.from ?? null);
    const newOnly = shared(startAt.newOnly);
    return unit.run(
      statement(
        sql`WITH g AS (
         INSERT INTO consumer_groups (tenant_id, queue_id, name, subscription_from, backfill_from)
         VALUES (${tenantId}, ${queueId}, ${consumerGroup}, CASE WHEN ${from}::timestamptz IS NOT NULL THEN ${from}::timestamptz WHEN ${newOnly} THEN now() END,
                 CASE WHEN ${from}::timestamptz IS NULL AND ${newOnly} THEN NULL ELSE '' END)
         ON CONFLICT (tenant_id, queue_id, name) DO NOTHING
         RETURNING *
       )
       SELECT count(*)::int AS created FROM g`,
        ([row]: Array<{ created: number }>) => row.created > 0,
      ),
    );
  }

  /**
   * One step of a group's look through its queue's partitions, in name order from where the last one stopped: a
   * cursor at the group's starting point for each partition with something past it. The group's row is locked, or
   * skipped when another pop of the group is taking the step. Undefined when there was no step to take.
   */
  backfill(
    tenantId: string,
    queueId: string,
    consumerGroup: string,
    limit: number,
  ): Statement<{ created: number; done: boolean } | undefined> {
    const [tenant, queue, group, most] = [tenantId, queueId, consumerGroup, limit].map(shared);
    return prepared(
      'leasehold_backfill',
      sql`WITH g AS MATERIALIZED (
         SELECT g.tenant_id, g.queue_id, g.name, g.subscription_from, g.backfill_from FROM consumer_groups g
          WHERE g.tenant_id = ${tenant} AND g.queue_id = ${queue} AND g.name = ${group} AND g.backfill_from IS NOT NULL
            FOR UPDATE SKIP LOCKED
       ), batch AS MATERIALIZED (
         SELECT p.tenant_id, p.id, p.queue_id, p.name, p.last_offset, g.name AS consumer_group, g.subscription_from
           FROM g
          CROSS JOIN LATERAL (
                SELECT p.* FROM partitions p
                 WHERE p.tenant_id = ${tenant} AND p.queue_id = ${queue} AND p.name > g.backfill_from
                 ORDER BY p.name
                 LIMIT ${most}) p
       ), created AS (
         INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
         SELECT b.tenant_id, b.queue_id, b.id, b.consumer_group, s.start_offset, s.start_offset
           FROM batch b
          CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('b', 'b'))} AS start_offset) s
          WHERE s.start_offset < b.last_offset
          ORDER BY b.id
         ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
         RETURNING tenant_id, queue_id, consumer_group, partition_id, committed_offset
       ), ${raw(
         groupLagCte(
           'lag_counted',
           `SELECT c.tenant_id, c.queue_id, c.consumer_group, b.last_offset - c.committed_offset AS lag
            FROM created c JOIN batch b ON b.id = c.partition_id`,
         ),
       )}, advanced AS (
         UPDATE consumer_groups cg
            SET backfill_from = CASE WHEN (SELECT count(*) FROM batch) < ${most} THEN NULL
                                     ELSE (SELECT max(b.name) FROM batch b) END
           FROM g
          WHERE cg.tenant_id = g.tenant_id AND cg.queue_id = g.queue_id AND cg.name = g.name
         RETURNING cg.backfill_from IS NULL AS done
       )
       SELECT EXISTS (SELECT 1 FROM g) AS held, (SELECT count(*) FROM created)::int AS created,
              COALESCE((SELECT done FROM advanced), true) AS done`,
      ([row]: Array<{ held: boolean; created: number; done: boolean }>) =>
        row.held ? { created: row.created, done: row.done } : undefined,
    );
  }

  /** A cursor at the group's starting point on one partition, when it has none and there is something to read. */
  ensureCursor(tenantId: string, queueId: string, partitionId: string, consumerGroup: string): Statement<void> {
    return statement(
      sql`WITH partition AS MATERIALIZED (
         SELECT p.tenant_id, p.queue_id, p.id, p.last_offset, g.name, s.start_offset
           FROM partitions p
           JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id AND g.name = ${consumerGroup}
          CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('p', 'g'))} AS start_offset) s
          WHERE p.tenant_id = ${tenantId} AND p.queue_id = ${queueId} AND p.id = ${partitionId} AND s.start_offset < p.last_offset
       ), created AS (
         INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
         SELECT tenant_id, queue_id, id, name, start_offset, start_offset FROM partition
         ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
         RETURNING tenant_id, queue_id, consumer_group
       ), ${raw(
         groupLagCte(
           'lag_counted',
           'SELECT c.tenant_id, c.queue_id, c.consumer_group, p.last_offset - p.start_offset AS lag FROM created c, partition p',
         ),
       )}
       SELECT 1`,
      nothing,
    );
  }

  databaseNow(): Statement<string> {
    return statement(
      sql`SELECT ${raw(isoTimestamp('clock_timestamp()'))} AS now`,
      ([row]: Array<{ now: string }>) => row.now,
    );
  }

  discover(
    tenantId: string,
    filter: { namespace: string | undefined; task: string | undefined },
    limit: number,
  ): Statement<string[]> {
    const namespace = shared(filter.namespace ?? null);
    const task = shared(filter.task ?? null);
    return statement(
      sql`SELECT name FROM queues
        WHERE tenant_id = ${tenantId} AND (${namespace}::text IS NULL OR namespace = ${namespace})
          AND (${task}::text IS NULL OR task = ${task})
        ORDER BY priority DESC, name
        LIMIT ${limit}`,
      (rows: Array<{ name: string }>) => rows.map((row) => row.name),
    );
  }

  /** Until something held back by delayedProcessing, windowBuffer or retryDelay comes due (0 or less: it already has). */
  nextDueInMs(tenantId: string, request: ClaimRequest): Statement<number | undefined> {
    const partition = shared(request.partitionId ?? null);
    const window = shared(request.windowBuffer);
    const delayed = shared(request.delayedProcessing);
    const retryDelay = shared(request.retryDelayMs);
    return statement(
      sql`SELECT ceil(EXTRACT(EPOCH FROM min(s.due) - clock_timestamp()) * 1000) AS due_in_ms
         FROM (SELECT GREATEST(
                        CASE WHEN ${window}::int > 0 THEN ${raw(NEWEST_CREATED_AT)} + make_interval(secs => ${window}) END,
                        CASE WHEN ${delayed}::int > 0 AND c.committed_offset >= c.delivered_offset
                             THEN ${raw(NEXT_CREATED_AT)} + make_interval(secs => ${delayed}) END,
                        c.retry_at,
                        CASE WHEN ${retryDelay}::int > 0 THEN c.lease_expires_at + ${retryDelay}::int * interval '1 ms' END) AS due
                 FROM consumers c
                 JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
                WHERE c.tenant_id = ${tenantId} AND c.queue_id = ${request.queueId} AND c.consumer_group = ${request.consumerGroup}
                  AND (${partition}::uuid IS NULL OR c.partition_id = ${partition}::uuid)
                  AND p.last_offset > c.committed_offset
                  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= clock_timestamp())) s`,
      ([row]: Array<{ due_in_ms: string | null }>) =>
        row?.due_in_ms === null || row === undefined ? undefined : Number(row.due_in_ms),
    );
  }

  /** Rows since claimed under a new lease id are not touched. Answers what became claimable, per partition name. */
  release(tenantId: string, leaseId: string): Statement<Map<string, number>> {
    const tenant = shared(tenantId);
    const lease = shared(leaseId);
    return statement(
      sql`WITH release_locked AS (
         SELECT partition_id, consumer_group FROM consumers
          WHERE tenant_id = ${tenant} AND lease_id = ${lease}
          ORDER BY partition_id, consumer_group
            FOR UPDATE
       ), released AS (
         UPDATE consumers c
            SET lease_id = NULL, lease_expires_at = NULL, lease_end_offset = NULL, updated_at = now()
           FROM release_locked l
          WHERE c.tenant_id = ${tenant} AND c.partition_id = l.partition_id AND c.consumer_group = l.consumer_group
            AND c.lease_id = ${lease}
         RETURNING c.tenant_id, c.partition_id, c.committed_offset
       )
       SELECT p.name AS partition, p.last_offset - r.committed_offset AS claimable
         FROM released r
         JOIN partitions p ON p.tenant_id = r.tenant_id AND p.id = r.partition_id`,
      (rows: Array<{ partition: string; claimable: string }>) =>
        new Map(rows.map((row) => [row.partition, Number(row.claimable)])),
    );
  }

  claim(tenantId: string, request: ClaimRequest): Statement<ClaimedMessage[]> {
    return prepared(claimName(request), claimSql(tenantId, request), (rows: ClaimedRow[]) =>
      this.claimed(request, rows),
    );
  }

  private claimed(request: ClaimRequest, rows: ClaimedRow[]): ClaimedMessage[] {
    const leaseId = request.autoAck ? null : request.leaseId;
    // Object.assign, not a spread: on Node 20 a spread costs microseconds per message.
    return rows.map((row) =>
      Object.assign(storedMessage(row, this.cipher), {
        partitionId: row.partition_id,
        partition: row.partition,
        leaseId,
        consumerGroup: request.consumerGroup,
        deliveryAttempt: row.delivery_attempt,
        leaseEpoch: Number(row.lease_epoch),
        leaseLost: row.lease_lost,
        seq: Number(row.seq),
        afterOffset: Number(row.after_offset),
        throughOffset: Number(row.through_offset),
      }),
    );
  }
}

export type ClaimedRow = StoredMessageRow & {
  partition_id: string;
  partition: string;
  delivery_attempt: number;
  lease_lost: boolean;
  lease_epoch: string;
  seq: string;
  after_offset: string;
  through_offset: string;
};

interface TargetRow {
  id: string;
  lease_time: number;
  delayed_processing: number;
  window_buffer: number;
  retry_delay_ms: number;
  partition_id: string | null;
  group_exists: boolean;
  backfilling: boolean;
  has_cursor: boolean;
}
