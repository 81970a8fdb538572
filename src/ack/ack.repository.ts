import { Injectable } from '@nestjs/common';
import { compositeKey } from '../common/composite-key';
import { readyAfter } from '../consumer-groups/cursor-ready';
import { groupLagCte } from '../consumer-groups/counters';
import { storedBytes, UsageChange } from '../limits/stored-usage.repository';
import { uuidv7 } from '../common/uuid';
import {
  ArrayType,
  nothing,
  planAsAnyTenant,
  prepared,
  requestArrays,
  raw,
  shared,
  Sql,
  sql,
  Statement,
  statement,
  unsized,
} from '../database/statement';
import { TransactionKey } from '../message/message-shape';
import { keepsDeadLetters } from '../queues/keeps-dead-letters';

export interface CursorKey {
  partitionId: string;
  consumerGroup: string;
}

export interface Cursor extends CursorKey {
  queue: string;
  partition: string;
  lastOffset: number;
  retryLimit: number;
  /** deadLetterQueue or dlqAfterMaxRetries: messages that use up their retries are kept. */
  deadLetterQueue: boolean;
  /** The queue's retryDelay: a batch handed back by a failure is not claimed again before it has passed. */
  retryDelayMs: number;
  committedOffset: number;
  /** The first message kept past the cursor (retention may have deleted some); null when there is none. */
  nextOffset: number | null;
  deliveredOffset: number;
  leaseEndOffset: number | null;
  leaseId: string | null;
  /** lease_expires_at > clock_timestamp(): live when the row was locked, by the database clock. */
  leaseLive: boolean;
  /** How many claims this row has had: the fencing token of the latest. */
  leaseEpoch: number;
  retryCount: number;
}

export interface CursorUpdate extends CursorKey {
  committedOffset: number;
  committedBefore: number;
  retryCount: number;
  releaseLease: boolean;
  /** Greater than 0: not claimable again for this many milliseconds from the commit. */
  retryAfterMs: number;
}

export interface DeadLetter extends CursorKey {
  seq: number;
  errorMessage: string | null;
  retryCount: number;
}

/** Every statement of the ack; the service runs them through its unit of work. */
@Injectable()
export class AckRepository {
  /**
   * Primary-key order, the order lease renewal locks in, so concurrent acks and extends queue instead of deadlocking.
   * LIMIT keeps the planner from flattening the lateral lookups into joins that, on stale statistics, read the
   * queue's every partition.
   */
  lockCursors(tenantId: string, keys: CursorKey[]): Statement<Cursor[]> {
    const tenant = planAsAnyTenant(shared(tenantId));
    const partitionIds = keys.map((key) => key.partitionId);
    const groups = keys.map((key) => key.consumerGroup);
    return prepared(
      'leasehold_ack_lock',
      sql`WITH locked AS (
         SELECT c.*
           FROM (SELECT * FROM unnest(${unsized(partitionIds, 'uuid[]')}, ${unsized(groups, 'text[]')}) AS u(partition_id, consumer_group)
                  ORDER BY partition_id, consumer_group) AS t
          CROSS JOIN LATERAL (
                SELECT c.partition_id, c.consumer_group, c.committed_offset, c.delivered_offset,
                       c.lease_end_offset, c.lease_id, c.lease_expires_at, c.lease_epoch, c.retry_count
                  FROM consumers c
                 WHERE c.tenant_id = ${tenant} AND c.partition_id = t.partition_id AND c.consumer_group = t.consumer_group
                   FOR UPDATE
              ) c
       )
       SELECT l.partition_id, l.consumer_group, q.name AS queue, p.name AS partition, p.last_offset,
              q.retry_limit, ${raw(keepsDeadLetters('q'))} AS dead_letter_queue, q.retry_delay_ms,
              l.committed_offset, l.delivered_offset, l.lease_end_offset,
              (SELECT min(m.seq) FROM messages m
                WHERE m.tenant_id = ${tenant} AND m.partition_id = l.partition_id AND m.seq > l.committed_offset) AS next_offset,
              l.lease_id, l.lease_epoch, l.retry_count, COALESCE(l.lease_expires_at > clock_timestamp(), false) AS lease_live
         FROM locked l
        CROSS JOIN LATERAL (
              SELECT p.name, p.last_offset, p.queue_id FROM partitions p
               WHERE p.tenant_id = ${tenant} AND p.id = l.partition_id
               LIMIT 1) p
        CROSS JOIN LATERAL (
              SELECT q.name, q.retry_limit, q.dead_letter_queue, q.dlq_after_max_retries, q.retry_delay_ms FROM queues q
               WHERE q.tenant_id = ${tenant} AND q.id = p.queue_id
               LIMIT 1) q
        ORDER BY l.partition_id, l.consumer_group`,
      (rows: CursorRow[]) => rows.map(toCursor),
    );
  }

  /** Per compositeKey(partitionId, transactionId), the message's offset. LIMIT as in lockCursors; the pair is unique. */
  offsets(tenantId: string, keys: TransactionKey[]): Statement<Map<string, number>> {
    const partitionIds = keys.map((key) => key.partitionId);
    const transactionIds = keys.map((key) => key.transactionId);
    return prepared(
      'leasehold_ack_offsets',
      sql`SELECT m.partition_id, m.transaction_id, m.seq
         FROM unnest(${unsized(partitionIds, 'uuid[]')}, ${unsized(transactionIds, 'text[]')}) AS t(partition_id, transaction_id)
        CROSS JOIN LATERAL (
              SELECT m.partition_id, m.transaction_id, m.seq
                FROM messages m
               WHERE m.tenant_id = ${tenantId} AND m.partition_id = t.partition_id AND m.transaction_id = t.transaction_id
               LIMIT 1
            ) m`,
      (rows: OffsetRow[]) =>
        new Map(rows.map((row) => [compositeKey(row.partition_id, row.transaction_id), Number(row.seq)])),
    );
  }

  existingPartitions(tenantId: string, partitionIds: string[]): Statement<Set<string>> {
    return statement(
      sql`SELECT id FROM partitions WHERE tenant_id = ${tenantId} AND id = ANY(${partitionIds}::uuid[])`,
      (rows: Array<{ id: string }>) => new Set(rows.map((row) => row.id)),
    );
  }

  /**
   * The ANY bounds the scan of consumers to the keys whatever join the planner picks (on stale statistics it hashes the
   * tenant's every row otherwise).
   */
  saveCursors(tenantId: string, updates: CursorUpdate[]): Statement<void> {
    const partitionIds = shared(updates.map((update) => update.partitionId));
    const { array, name } = requestArrays(updates.length, 'leasehold_ack_save');
    const column = (key: keyof CursorUpdate, type: ArrayType) =>
      array(
        updates.map((update) => update[key]),
        type,
      );
    return prepared(
      name,
      sql`WITH saved AS (
         UPDATE consumers c
            SET ${raw(SAVED_CURSOR)}
           FROM unnest(${array(partitionIds, 'uuid[]')}, ${column('consumerGroup', 'text[]')},
                       ${column('committedOffset', 'bigint[]')}, ${column('retryCount', 'int[]')},
                       ${column('releaseLease', 'boolean[]')}, ${column('committedBefore', 'bigint[]')},
                       ${column('retryAfterMs', 'int[]')})
             AS t(partition_id, consumer_group, committed_offset, retry_count, release_lease, committed_before,
                  retry_after_ms)
          WHERE c.tenant_id = ${tenantId} AND c.partition_id = t.partition_id AND c.consumer_group = t.consumer_group
            AND c.partition_id = ANY (${array(partitionIds, 'uuid[]')})
         RETURNING c.tenant_id, c.queue_id, c.consumer_group, t.committed_before - t.committed_offset AS lag
       ), ${raw(groupLagCte('lag_counted', 'SELECT * FROM saved'))}
       SELECT 1`,
      nothing,
    );
  }

  /**
   * The update of one cursor decided on what its claim left (HandedOutLeases), made only while the cursor is still as
   * `held` says and every acked message is where it was: otherwise nothing changes and the answer is undefined. It
   * sends the redelivery notice itself (`notify`, given the messages left past the cursor): only it reads how many.
   */
  saveHandedOut(
    tenantId: string,
    update: CursorUpdate,
    held: HeldCursor,
    notify: (messages: Sql) => Sql,
  ): Statement<{ lastOffset: number } | undefined> {
    const tenant = shared(tenantId);
    const partitionId = shared(update.partitionId);
    const consumerGroup = shared(update.consumerGroup);
    const seqs = [...held.acked.values()];
    const transactionIds = [...held.acked.keys()];
    // The row is locked first and checked after: a check in the UPDATE's own WHERE is made before it waits for the
    // lock, so a lease that ran out meanwhile would still pass (the locking ack checks after its lock too).
    return prepared(
      'leasehold_ack_save_handed_out',
      sql`WITH held_handed_out AS MATERIALIZED (
         SELECT c.lease_id, c.lease_epoch, c.lease_expires_at, c.committed_offset, c.lease_end_offset
           FROM consumers c
          WHERE c.tenant_id = ${tenant} AND c.partition_id = ${partitionId}::uuid AND c.consumer_group = ${consumerGroup}::text
            FOR UPDATE
       ), still AS MATERIALIZED (
         SELECT 1 FROM held_handed_out h
          WHERE h.lease_id = ${held.leaseId}::uuid AND h.lease_epoch = ${held.leaseEpoch}::bigint
            AND h.lease_expires_at > clock_timestamp()
            AND h.committed_offset = ${held.committedOffset}::bigint AND h.lease_end_offset = ${held.leaseEndOffset}::bigint
            AND (SELECT count(*) FROM unnest(${unsized(seqs, 'bigint[]')}, ${unsized(transactionIds, 'text[]')}) AS a(seq, transaction_id)
                   JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = ${partitionId}::uuid AND m.seq = a.seq
                                  AND m.transaction_id = a.transaction_id) = ${seqs.length}::int
       ), saved AS (
         UPDATE consumers c
            SET ${raw(SAVED_CURSOR)}
           FROM (SELECT ${update.committedOffset}::bigint AS committed_offset, ${update.retryCount}::int AS retry_count,
                        ${update.releaseLease}::boolean AS release_lease, ${update.committedBefore}::bigint AS committed_before,
                        ${update.retryAfterMs}::int AS retry_after_ms) AS t
          WHERE c.tenant_id = ${tenant} AND c.partition_id = ${partitionId}::uuid AND c.consumer_group = ${consumerGroup}::text
            AND EXISTS (SELECT 1 FROM still)
         RETURNING c.tenant_id, c.queue_id, c.consumer_group, c.partition_id, c.committed_offset,
                   c.lease_id IS NULL AS released, t.committed_before - t.committed_offset AS lag
       ), ${raw(groupLagCte('lag_counted', 'SELECT tenant_id, queue_id, consumer_group, lag FROM saved'))},
       kept AS (
         SELECT p.last_offset, s.committed_offset, s.released
           FROM saved s JOIN partitions p ON p.tenant_id = s.tenant_id AND p.id = s.partition_id
       ), notified AS (
         SELECT ${notify(sql`(k.last_offset - k.committed_offset)`)} FROM kept k
          WHERE k.released AND k.last_offset > k.committed_offset
       )
       SELECT k.last_offset, (SELECT count(*) FROM notified) AS notified FROM kept k`,
      ([row]: Array<{ last_offset: string }>) => (row ? { lastOffset: Number(row.last_offset) } : undefined),
    );
  }

  /** Copies messages into the dead-letter queue; the cursor moving past them is the caller's update. */
  deadLetter(tenantId: string, letters: DeadLetter[]): Statement<UsageChange> {
    const tenant = shared(tenantId);
    return statement(
      sql`WITH lettered AS (
         INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq,
                                   transaction_id, trace_id, payload, payload_bytes, producer_sub, message_created_at,
                                   error_message, retry_count, key_id)
         SELECT ${tenant}, t.id, p.queue_id, m.partition_id, t.consumer_group, m.id, m.seq, m.transaction_id,
                m.trace_id, m.payload, ${raw(storedBytes('m'))}, m.producer_sub, m.created_at, t.error_message,
                t.retry_count, m.key_id
           FROM unnest(${letters.map(() => uuidv7())}::uuid[], ${letters.map((letter) => letter.partitionId)}::uuid[],
                       ${letters.map((letter) => letter.seq)}::bigint[],
                       ${letters.map((letter) => letter.consumerGroup)}::text[],
                       ${letters.map((letter) => letter.errorMessage)}::text[],
                       ${letters.map((letter) => letter.retryCount)}::int[])
             AS t(id, partition_id, seq, consumer_group, error_message, retry_count)
           JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = t.partition_id AND m.seq = t.seq
           JOIN partitions p ON p.tenant_id = ${tenant} AND p.id = m.partition_id
         RETURNING payload_bytes
       )
       SELECT count(*)::int AS messages, COALESCE(sum(payload_bytes), 0) AS bytes FROM lettered`,
      ([row]: Array<{ messages: number; bytes: string }>) => ({ bytes: Number(row.bytes), messages: row.messages }),
    );
  }
}

/** A cursor as a claim left it, and the offsets of the messages an ack names (by transactionId). */
export interface HeldCursor {
  leaseId: string;
  leaseEpoch: number;
  committedOffset: number;
  leaseEndOffset: number;
  acked: Map<string, number>;
}

/**
 * How a cursor update `t` is written to the cursor `c`. Releasing clears all three lease columns: the renewal only
 * matches a set lease_id, and the partial lease index only holds rows that have one.
 */
const SAVED_CURSOR = `committed_offset = t.committed_offset,
                retry_count = t.retry_count,
                lease_id = CASE WHEN t.release_lease THEN NULL ELSE c.lease_id END,
                lease_expires_at = CASE WHEN t.release_lease THEN NULL ELSE c.lease_expires_at END,
                lease_end_offset = CASE WHEN t.release_lease THEN NULL ELSE c.lease_end_offset END,
                retry_at = CASE WHEN t.retry_after_ms > 0 THEN clock_timestamp() + t.retry_after_ms * interval '1 ms'
                                ELSE c.retry_at END,
                ready = ${readyAfter('c', 't.committed_offset')},
                updated_at = now()`;

interface CursorRow {
  partition_id: string;
  consumer_group: string;
  queue: string;
  partition: string;
  last_offset: string;
  retry_limit: number;
  dead_letter_queue: boolean;
  retry_delay_ms: number;
  committed_offset: string;
  next_offset: string | null;
  delivered_offset: string;
  lease_end_offset: string | null;
  lease_id: string | null;
  lease_live: boolean;
  lease_epoch: string;
  retry_count: number;
}

interface OffsetRow {
  partition_id: string;
  transaction_id: string;
  seq: string;
}

function toCursor(row: CursorRow): Cursor {
  return {
    partitionId: row.partition_id,
    consumerGroup: row.consumer_group,
    queue: row.queue,
    partition: row.partition,
    lastOffset: Number(row.last_offset),
    retryLimit: row.retry_limit,
    deadLetterQueue: row.dead_letter_queue,
    retryDelayMs: row.retry_delay_ms,
    committedOffset: Number(row.committed_offset),
    nextOffset: row.next_offset === null ? null : Number(row.next_offset),
    deliveredOffset: Number(row.delivered_offset),
    leaseEndOffset: row.lease_end_offset === null ? null : Number(row.lease_end_offset),
    leaseId: row.lease_id,
    leaseLive: row.lease_live,
    leaseEpoch: Number(row.lease_epoch),
    retryCount: row.retry_count,
  };
}
