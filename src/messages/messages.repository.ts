import { Injectable, UnprocessableEntityException } from '@nestjs/common';
import { nothing, raw, shared, Sql, sql, Statement, statement } from '../database/statement';
import { claimableNow, readyAfter } from '../consumer-groups/cursor-ready';
import { isoTimestamp } from '../common/sql-timestamp';
import { subscriptionStartOffset } from '../consumer-groups/subscription-start';
import { storedBytes, UsageChange } from '../limits/stored-usage.repository';
import { groupLagCte, queueStoredCte } from '../consumer-groups/counters';
import { MESSAGE_ENVELOPE_BYTES } from '../pop/pop.repository';
import { PayloadCipher, UnreadablePayloadError } from '../encryption/payload-cipher';
import type { CursorWork } from '../wakeup/parked-polls';
import {
  STORED_MESSAGE_COLUMNS,
  storedMessage,
  StoredMessage,
  StoredMessageRow,
  WireMessage,
} from '../message/message-shape';

export type MessageStatus = 'pending' | 'leased' | 'completed' | 'dead_letter';

/** A partition's cursors as lockLeased holds them. */
export interface HeldCursors {
  /** A live lease covers the message. */
  leased: boolean;
  /** Cursors a claim could take now: it skips them while they are held, so their polls are woken after. */
  claimable: CursorWork[];
}

interface HeldCursorRow {
  leased: boolean | null;
  claimable: boolean;
  queue: string;
  consumer_group: string;
  partition: string;
  messages: string;
}

export interface MessageFilter {
  queue: string;
  partition: string | undefined;
  consumerGroup: string;
  status: MessageStatus | undefined;
  from: string | undefined;
  to: string | undefined;
  limit: number;
  after: { createdAt: string; partitionId: string; seq: string } | undefined;
}

export interface ListedMessage extends WireMessage {
  status: MessageStatus;
  seq: string;
}

export interface FoundMessage {
  queueId: string;
  queue: string;
  message: StoredMessage & Pick<WireMessage, 'partitionId' | 'partition'>;
}

export interface GroupState {
  consumerGroup: string;
  status: MessageStatus;
  deliveryAttempt: number;
  leaseActive: boolean;
  leaseExpiresAt: string | null;
  leaseEpoch: number;
}

export interface DeadLetterSummary {
  consumerGroup: string;
  errorMessage: string | null;
  retryCount: number;
  failedAt: string;
}

export interface DeadLetterCopy {
  queue: string;
  partition: string;
  payloadJson: string;
  traceId: string | null;
}

/**
 * A message `m` in the eyes of the group whose cursor is `c`, and its dead letters. A group with no cursor in the
 * partition stands at its starting point there (`pos.start`, from GROUP_START), or at 0 when the group does not exist.
 */
function statusOf(group: unknown): Sql {
  return sql`CASE WHEN EXISTS (SELECT 1 FROM dead_letters d
                             WHERE d.tenant_id = m.tenant_id AND d.partition_id = m.partition_id
                               AND d.transaction_id = m.transaction_id AND d.consumer_group = ${group})
               THEN 'dead_letter'
               WHEN m.seq <= COALESCE(c.committed_offset, pos.start) THEN 'completed'
               WHEN c.lease_expires_at > now() AND m.seq <= c.lease_end_offset THEN 'leased'
               ELSE 'pending' END`;
}

/** `pos.start`: where the group `g` (joined on the partition `p`'s queue, or null) starts in `p` without a cursor. */
const GROUP_START = raw(`LEFT JOIN LATERAL (
    SELECT CASE WHEN c.committed_offset IS NOT NULL OR g.name IS NULL THEN 0
                ELSE ${subscriptionStartOffset('p', 'g')} END AS start) pos ON true`);

const CHANGES = '\u0000changes\u0000';

/** A counters CTE (queueStoredCte) over changes that carry parameters: they go in where the helper writes them. */
function withChanges(cte: (changes: string) => string, changes: Sql): Sql {
  const [head, tail] = cte(CHANGES).split(CHANGES);
  return sql`${raw(head)}${changes}${raw(tail)}`;
}

interface PageRow extends StoredMessageRow {
  partition_id: string;
  partition: string;
  seq: string;
  status: MessageStatus;
  delivery_attempt: number;
  lease_epoch: string;
  page_rows: string;
}

@Injectable()
export class MessagesRepository {
  constructor(private readonly cipher: PayloadCipher) {}

  /** Ordered by creation time, then partition id and offset, which keeps pages stable; one message always comes. */
  page(
    tenantId: string,
    filter: MessageFilter,
    maxBytes: number,
  ): Statement<{ messages: ListedMessage[]; more: boolean }> {
    const tenant = shared(tenantId);
    const partition = shared(filter.partition ?? null);
    const group = shared(filter.consumerGroup);
    const from = shared(filter.from ?? null);
    const to = shared(filter.to ?? null);
    const afterAt = shared(filter.after?.createdAt ?? null);
    const status = shared(filter.status ?? null);
    const limit = shared(filter.limit);
    return statement(
      sql`WITH page AS (
         SELECT x.partition_id, x.partition, x.seq, x.created_at, x.status, x.bytes, x.delivery_attempt, x.lease_epoch
           FROM queues q
           JOIN partitions p ON p.tenant_id = q.tenant_id AND p.queue_id = q.id AND (${partition}::text IS NULL OR p.name = ${partition})
           LEFT JOIN consumers c ON c.tenant_id = p.tenant_id AND c.partition_id = p.id AND c.consumer_group = ${group}
           LEFT JOIN consumer_groups g ON g.tenant_id = q.tenant_id AND g.queue_id = q.id AND g.name = ${group}
           ${GROUP_START}
          CROSS JOIN LATERAL (
                SELECT s.* FROM (
                       SELECT m.partition_id, p.name AS partition, m.seq, m.created_at, ${statusOf(group)} AS status,
                              COALESCE(m.payload_bytes, octet_length(m.payload::text)) + octet_length(m.transaction_id)
                                + COALESCE(octet_length(m.trace_id), 0) + COALESCE(octet_length(m.producer_sub), 0)
                                + 2 * octet_length(p.name) + octet_length(${group}) + ${raw(String(MESSAGE_ENVELOPE_BYTES))} AS bytes,
                              COALESCE(c.delivery_attempt, 0) AS delivery_attempt, COALESCE(c.lease_epoch, 0) AS lease_epoch
                         FROM messages m
                        WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id
                          AND (${from}::timestamptz IS NULL OR m.created_at >= ${from})
                          AND (${to}::timestamptz IS NULL OR m.created_at < ${to})
                          AND (${afterAt}::timestamptz IS NULL OR (m.created_at, m.partition_id, m.seq) < (${afterAt}, ${filter.after?.partitionId ?? null}::uuid, ${filter.after?.seq ?? null}::bigint))
                       ) s
                 WHERE ${status}::text IS NULL OR s.status = ${status}
                 ORDER BY s.seq DESC
                 LIMIT ${limit}) x
          WHERE q.tenant_id = ${tenant} AND q.name = ${filter.queue}
          ORDER BY x.created_at DESC, x.partition_id DESC, x.seq DESC
          LIMIT ${limit}
       ), sized AS (
         SELECT z.*, count(*) OVER () AS page_rows,
                sum(z.bytes) OVER (ORDER BY z.created_at DESC, z.partition_id DESC, z.seq DESC) AS answer_bytes,
                row_number() OVER (ORDER BY z.created_at DESC, z.partition_id DESC, z.seq DESC) AS position
           FROM page z
       )
       SELECT ${raw(STORED_MESSAGE_COLUMNS)}, z.partition_id, z.partition, z.seq, z.status, z.page_rows,
              CASE WHEN z.status = 'leased' THEN z.delivery_attempt ELSE 0 END AS delivery_attempt, z.lease_epoch
         FROM sized z
         JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = z.partition_id AND m.seq = z.seq
        WHERE z.answer_bytes <= ${maxBytes} OR z.position = 1
        ORDER BY z.created_at DESC, z.partition_id DESC, z.seq DESC`,
      (rows: PageRow[]) => {
        const pageRows = rows.length > 0 ? Number(rows[0].page_rows) : 0;
        return {
          messages: rows.map((row) =>
            Object.assign(storedMessage(row, this.cipher), {
              partitionId: row.partition_id,
              partition: row.partition,
              leaseId: null,
              consumerGroup: filter.consumerGroup,
              deliveryAttempt: row.delivery_attempt,
              leaseEpoch: Number(row.lease_epoch),
              status: row.status,
              seq: row.seq,
            }),
          ),
          more: rows.length < pageRows || pageRows === filter.limit,
        };
      },
    );
  }

  find(tenantId: string, partitionId: string, transactionId: string): Statement<FoundMessage | undefined> {
    return statement(
      sql`SELECT ${raw(STORED_MESSAGE_COLUMNS)}, q.id AS queue_id, q.name AS queue, p.name AS partition
         FROM messages m
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE m.tenant_id = ${tenantId} AND m.partition_id = ${partitionId} AND m.transaction_id = ${transactionId}`,
      (rows: Array<StoredMessageRow & { queue_id: string; queue: string; partition: string }>) => {
        if (rows.length === 0) return undefined;
        const [row] = rows;
        return {
          queueId: row.queue_id,
          queue: row.queue,
          message: Object.assign(storedMessage(row, this.cipher), { partitionId, partition: row.partition }),
        };
      },
    );
  }

  groupStates(tenantId: string, queueId: string, partitionId: string, transactionId: string): Statement<GroupState[]> {
    const partition = shared(partitionId);
    return statement(
      sql`SELECT g.name AS consumer_group, ${statusOf(raw('g.name'))} AS status,
              CASE WHEN c.lease_expires_at > now() AND m.seq > c.committed_offset AND m.seq <= c.lease_end_offset
                   THEN c.delivery_attempt ELSE 0 END AS delivery_attempt,
              COALESCE(c.lease_expires_at > now(), false) AS lease_active,
              CASE WHEN c.lease_expires_at > now() THEN ${raw(isoTimestamp('c.lease_expires_at'))} END AS lease_expires_at,
              COALESCE(c.lease_epoch, 0) AS lease_epoch
         FROM consumer_groups g
         JOIN partitions p ON p.tenant_id = g.tenant_id AND p.id = ${partition}
         JOIN messages m ON m.tenant_id = g.tenant_id AND m.partition_id = ${partition} AND m.transaction_id = ${transactionId}
         LEFT JOIN consumers c ON c.tenant_id = g.tenant_id AND c.partition_id = ${partition} AND c.consumer_group = g.name
         ${GROUP_START}
        WHERE g.tenant_id = ${tenantId} AND g.queue_id = ${queueId}
        ORDER BY g.name`,
      (
        rows: Array<{
          consumer_group: string;
          status: MessageStatus;
          delivery_attempt: number;
          lease_active: boolean;
          lease_expires_at: string | null;
          lease_epoch: string;
        }>,
      ) =>
        rows.map((row) => ({
          consumerGroup: row.consumer_group,
          status: row.status,
          deliveryAttempt: row.delivery_attempt,
          leaseActive: row.lease_active,
          leaseExpiresAt: row.lease_expires_at,
          leaseEpoch: Number(row.lease_epoch),
        })),
    );
  }

  deadLetters(tenantId: string, partitionId: string, transactionId: string): Statement<DeadLetterSummary[]> {
    return statement(
      sql`SELECT consumer_group, error_message, retry_count, ${raw(isoTimestamp('created_at'))} AS failed_at
           FROM dead_letters WHERE tenant_id = ${tenantId} AND partition_id = ${partitionId} AND transaction_id = ${transactionId}
          ORDER BY consumer_group, created_at`,
      (rows: Array<{ consumer_group: string; error_message: string | null; retry_count: number; failed_at: string }>) =>
        rows.map((row) => ({
          consumerGroup: row.consumer_group,
          errorMessage: row.error_message,
          retryCount: row.retry_count,
          failedAt: row.failed_at,
        })),
    );
  }

  /**
   * Nothing changes while a live lease covers the message (run lockLeased first); the dead letter stores what the
   * message did. True when it moved.
   */
  moveToDeadLetters(
    tenantId: string,
    partitionId: string,
    transactionId: string,
    consumerGroup: string,
    reason: string,
    deadLetterId: string,
  ): Statement<boolean> {
    const tenant = shared(tenantId);
    return statement(
      sql`WITH gone AS (
         DELETE FROM messages WHERE tenant_id = ${tenant} AND partition_id = ${partitionId} AND transaction_id = ${transactionId} RETURNING *
       ), letter AS (
         INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq, transaction_id,
                                   trace_id, payload, payload_bytes, producer_sub, message_created_at, error_message,
                                   retry_count, key_id)
         SELECT ${tenant}, ${deadLetterId}, p.queue_id, g.partition_id, ${consumerGroup}, g.id, g.seq, g.transaction_id, g.trace_id, g.payload,
                ${raw(storedBytes('g'))}, g.producer_sub, g.created_at, ${reason}, 0, g.key_id
           FROM gone g JOIN partitions p ON p.tenant_id = ${tenant} AND p.id = g.partition_id
         RETURNING tenant_id, queue_id
       ), ${raw(queueStoredCte('stored_counted', 'SELECT tenant_id, queue_id, -1 AS messages, 0 AS partitions, 0 AS offsets FROM letter'))}
       SELECT count(*)::int AS moved FROM letter`,
      ([row]: Array<{ moved: number }>) => row.moved > 0,
    );
  }

  /** The message and its dead letters (run lockLeased first), and what they counted. */
  delete(
    tenantId: string,
    partitionId: string,
    transactionId: string,
  ): Statement<{ message: boolean; deadLetters: number; freed: UsageChange }> {
    const tenant = shared(tenantId);
    const partition = shared(partitionId);
    const transaction = shared(transactionId);
    return statement(
      sql`WITH message AS (
         DELETE FROM messages m WHERE tenant_id = ${tenant} AND partition_id = ${partition} AND transaction_id = ${transaction}
         RETURNING ${raw(storedBytes('m'))} AS bytes
       ), ${withChanges(
         (changes) => queueStoredCte('stored_counted', changes),
         sql`SELECT p.tenant_id, p.queue_id, -1 AS messages, 0 AS partitions, 0 AS offsets FROM message, partitions p
           WHERE p.tenant_id = ${tenant} AND p.id = ${partition}`,
       )}, letters AS (
         DELETE FROM dead_letters d WHERE tenant_id = ${tenant} AND partition_id = ${partition} AND transaction_id = ${transaction}
         RETURNING ${raw(storedBytes('d'))} AS bytes
       )
       SELECT (SELECT count(*)::int FROM message) AS messages, (SELECT count(*)::int FROM letters) AS dead_letters,
              (SELECT COALESCE(sum(bytes), 0) FROM message) + (SELECT COALESCE(sum(bytes), 0) FROM letters) AS bytes`,
      ([row]: Array<{ messages: number; dead_letters: number; bytes: string }>) => ({
        message: row.messages > 0,
        deadLetters: row.dead_letters,
        freed: { bytes: Number(row.bytes), messages: row.messages + row.dead_letters },
      }),
    );
  }

  /**
   * Cursors in primary-key order, as acks take them, so no claim can lease the message meanwhile; true when a live
   * lease covers the message.
   */
  lockLeased(tenantId: string, partitionId: string, transactionId: string): Statement<HeldCursors> {
    return statement(
      sql`SELECT c.lease_expires_at > now() AND m.seq > c.committed_offset AND m.seq <= c.lease_end_offset AS leased,
                ${raw(claimableNow('c', 'p'))} AS claimable,
                q.name AS queue, c.consumer_group, p.name AS partition, p.last_offset - c.committed_offset AS messages
         FROM consumers c
         JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
         LEFT JOIN messages m ON m.tenant_id = c.tenant_id AND m.partition_id = c.partition_id AND m.transaction_id = ${transactionId}
        WHERE c.tenant_id = ${tenantId} AND c.partition_id = ${partitionId}
        ORDER BY c.tenant_id, c.partition_id, c.consumer_group
          FOR UPDATE OF c`,
      (rows: Array<HeldCursorRow>) => ({
        leased: rows.some((row) => row.leased),
        claimable: rows
          .filter((row) => row.claimable)
          .map((row) => ({
            queue: row.queue,
            consumerGroup: row.consumer_group,
            partition: row.partition,
            messages: Number(row.messages),
          })),
      }),
    );
  }

  /** Removes the message's dead letters (of one group, or all), answering the oldest's copy of it. */
  takeDeadLetters(
    tenantId: string,
    partitionId: string,
    transactionId: string,
    consumerGroup: string | undefined,
  ): Statement<{ copy: DeadLetterCopy; removed: number; freed: UsageChange } | undefined> {
    const tenant = shared(tenantId);
    const group = shared(consumerGroup ?? null);
    return statement(
      sql`WITH gone AS (
           DELETE FROM dead_letters d
            WHERE d.tenant_id = ${tenant} AND d.partition_id = ${partitionId} AND d.transaction_id = ${transactionId}
              AND (${group}::text IS NULL OR d.consumer_group = ${group})
           RETURNING d.queue_id, d.partition_id, d.payload, d.key_id, d.trace_id, d.created_at, ${raw(storedBytes('d'))} AS bytes
         )
         SELECT q.name AS queue, p.name AS partition, g.payload::text AS payload, g.key_id, g.trace_id, g.bytes
           FROM gone g
           JOIN queues q ON q.tenant_id = ${tenant} AND q.id = g.queue_id
           JOIN partitions p ON p.tenant_id = ${tenant} AND p.id = g.partition_id
          ORDER BY g.created_at`,
      (
        rows: Array<{
          queue: string;
          partition: string;
          payload: string;
          key_id: string | null;
          trace_id: string | null;
          bytes: number;
        }>,
      ) => {
        if (rows.length === 0) return undefined;
        const [first] = rows;
        // Pushed again as sent: the push encrypts it if its queue says so now.
        let payloadJson: string;
        try {
          payloadJson = this.cipher.open(first.key_id, first.payload);
        } catch (error) {
          if (!(error instanceof UnreadablePayloadError)) throw error;
          throw new UnprocessableEntityException({ error: `dead letter cannot be retried: ${error.message}` });
        }
        return {
          copy: { queue: first.queue, partition: first.partition, payloadJson, traceId: first.trace_id },
          removed: rows.length,
          freed: { bytes: rows.reduce((sum, row) => sum + row.bytes, 0), messages: rows.length },
        };
      },
    );
  }

  /** The queue's cursors (or the partition's), in primary-key order: clear's first statement. */
  lockCursors(tenantId: string, queueId: string, partitionId: string | undefined): Statement<void> {
    const partition = shared(partitionId ?? null);
    return statement(
      sql`SELECT 1 FROM consumers
        WHERE tenant_id = ${tenantId} AND queue_id = ${queueId} AND (${partition}::uuid IS NULL OR partition_id = ${partition})
        ORDER BY tenant_id, partition_id, consumer_group
          FOR UPDATE`,
      nothing,
    );
  }

  /**
   * Advances lease epochs so old holders' acks are refused; the cursors are locked first (lockCursors), in primary-key
   * order.
   */
  clear(
    tenantId: string,
    queueId: string,
    partitionId: string | undefined,
  ): Statement<{ messages: number; partitions: number; freed: UsageChange }> {
    const tenant = shared(tenantId);
    const queue = shared(queueId);
    const partition = shared(partitionId ?? null);
    return statement(
      sql`WITH moved AS (
         UPDATE consumers c
            SET committed_offset = p.last_offset, delivered_offset = GREATEST(c.delivered_offset, p.last_offset),
                lease_id = NULL, lease_expires_at = NULL, lease_end_offset = NULL, lease_deadline = NULL,
                lease_epoch = c.lease_epoch + 1, retry_count = 0, delivery_attempt = 0, updated_at = now(),
                ready = ${raw(readyAfter('c', 'p.last_offset'))}
           FROM partitions p, consumers o
          WHERE c.tenant_id = ${tenant} AND c.queue_id = ${queue} AND (${partition}::uuid IS NULL OR c.partition_id = ${partition})
            AND p.tenant_id = c.tenant_id AND p.id = c.partition_id
            AND o.tenant_id = c.tenant_id AND o.partition_id = c.partition_id AND o.consumer_group = c.consumer_group
         -- o is the row as it stood (locked above): the cursor's lag falls from there to nothing.
         RETURNING c.tenant_id, c.queue_id, c.consumer_group, o.committed_offset - p.last_offset AS lag
       ), gone AS (
         DELETE FROM messages m
          USING partitions p
          WHERE p.tenant_id = ${tenant} AND p.queue_id = ${queue} AND (${partition}::uuid IS NULL OR p.id = ${partition})
            AND m.tenant_id = p.tenant_id AND m.partition_id = p.id
         RETURNING ${raw(storedBytes('m'))} AS bytes
       ), ${withChanges(
         (changes) => queueStoredCte('stored_counted', changes),
         sql`SELECT ${tenant}::uuid AS tenant_id, ${queue}::uuid AS queue_id, -count(*) AS messages, 0 AS partitions, 0 AS offsets FROM gone`,
       )}, ${raw(
         // Written after stored_counted so that it runs before it, in the order every write takes counters (push.repository).
         groupLagCte('lag_counted', 'SELECT * FROM moved'),
       )}
       SELECT (SELECT count(*)::int FROM gone) AS messages, (SELECT COALESCE(sum(bytes), 0) FROM gone) AS bytes,
              (SELECT count(*)::int FROM partitions
                WHERE tenant_id = ${tenant} AND queue_id = ${queue} AND (${partition}::uuid IS NULL OR id = ${partition})) AS partitions,
              (SELECT count(*) FROM moved) AS moved`,
      ([row]: Array<{ messages: number; partitions: number; bytes: string }>) => ({
        messages: row.messages,
        partitions: row.partitions,
        freed: { bytes: Number(row.bytes), messages: row.messages },
      }),
    );
  }
}
