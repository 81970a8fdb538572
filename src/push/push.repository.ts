import { Inject, Injectable, Optional } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseEngine, NamedStatement } from '../database/database-engine';
import { LockNamedRow } from '../queues/queues.repository';
import { EntityManager } from 'typeorm';
import { compositeKey } from '../common/composite-key';
import { subscriptionStartOffset } from '../common/subscription-start';
import { groupLagCte, queueStoredCte } from '../consumer-groups/counters';
import { arrayLiteral } from '../database/array-literal';
import { TransactionKey, NamedTransactionKey } from '../messages/message-shape';
import { usageCtes, usageValues, UsageRecord } from '../limits/stored-usage.repository';

export interface NewMessage {
  partitionId: string;
  seq: number;
  id: string;
  transactionId: string;
  traceId: string | null;
  /** The payload column's JSON text: as sent, or sealed when keyId is set. */
  payloadJson: string;
  /** What the message counts in its tenant's stored bytes: the stored text's size. */
  payloadBytes: number;
  /** The key the payload is sealed under; null for a plain one. */
  keyId: string | null;
}

/**
 * Every group of a pushed partition's queue gets something to read there: its drained cursors are marked ready (the
 * partition is locked, so no ack can unmark them before this commits), and a group with no cursor there gets one at
 * its starting point, which this statement's snapshot computes from the messages before this push.
 */
const CURSORS_OF_PUSHED = `pushed AS MATERIALIZED (
    SELECT p.tenant_id, p.id, p.queue_id, p.last_offset FROM partitions p
     WHERE p.tenant_id = $1 AND p.id = ANY($9::uuid[])
  ), cursors AS MATERIALIZED (
    SELECT c.partition_id, c.consumer_group, c.ready FROM consumers c
     WHERE c.tenant_id = $1 AND c.partition_id = ANY($9::uuid[])
  ), readied AS (
    UPDATE consumers c SET ready = true
      FROM cursors k
     WHERE c.tenant_id = $1 AND c.partition_id = k.partition_id AND c.consumer_group = k.consumer_group AND NOT k.ready
  ), uncovered AS MATERIALIZED (
    SELECT p.tenant_id, p.id, p.queue_id, p.last_offset, g.name, g.subscription_from
      FROM pushed p
      JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id
     WHERE NOT EXISTS (SELECT 1 FROM cursors k WHERE k.partition_id = p.id AND k.consumer_group = g.name)
  ), created AS (
    INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
    SELECT u.tenant_id, u.queue_id, u.id, u.name, s.start_offset, s.start_offset
      FROM uncovered u
     CROSS JOIN LATERAL (SELECT ${subscriptionStartOffset('u', 'u')} AS start_offset) s
     ORDER BY u.id, u.name
    ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
    RETURNING partition_id, consumer_group, committed_offset
  ), grown AS MATERIALIZED (
    SELECT p.tenant_id, p.queue_id, p.id, t.last_offset, t.last_offset - p.last_offset AS added
      FROM pushed p JOIN unnest($9::uuid[], $10::bigint[]) AS t(id, last_offset) ON t.id = p.id
  ), ${groupLagCte(
    'lag_counted',
    // A cursor made by this push lags from its starting point; any other, this push's messages. One another
    // transaction made meanwhile (the insert found it) started before this push committed, so counted without them.
    `SELECT g.tenant_id, g.queue_id, k.name AS consumer_group,
            CASE WHEN c.partition_id IS NULL THEN g.added ELSE g.last_offset - c.committed_offset END AS lag
       FROM grown g
       JOIN consumer_groups k ON k.tenant_id = g.tenant_id AND k.queue_id = g.queue_id
       LEFT JOIN created c ON c.partition_id = g.id AND c.consumer_group = k.name`,
  )}, ${queueStoredCte(
    'stored_counted',
    'SELECT tenant_id, queue_id, added AS messages, 0 AS partitions, added AS offsets FROM grown',
  )}`;

@Injectable()
export class PushRepository {
  /** What time alone makes deletable in a pushed partition (pending retention, eviction), as SQL over queue `q`. */
  private readonly due: string;

  constructor(
    private readonly engine: DatabaseEngine,
    @Optional() @Inject(APP_CONFIG) config?: AppConfig,
  ) {
    this.due = timeDue(config?.retention.pendingSeconds ?? 0);
  }

  /**
   * Looked up key by key: joined instead, a planner without fresh statistics scans the tenant's every message.
   * LIMIT keeps the lateral from being flattened into that join (the pair is unique).
   */
  async findExisting(tenantId: string, keys: TransactionKey[], manager: EntityManager): Promise<Map<string, string>> {
    const rows = await this.engine.prepared<{ partition_id: string; transaction_id: string; id: string }>(
      manager,
      'leasehold_find_pushed',
      `SELECT m.partition_id, m.transaction_id, m.id
         FROM unnest($2::uuid[], $3::text[]) AS t(partition_id, transaction_id)
        CROSS JOIN LATERAL (
              SELECT m.partition_id, m.transaction_id, m.id
                FROM messages m
               WHERE m.tenant_id = $1 AND m.partition_id = t.partition_id AND m.transaction_id = t.transaction_id
               LIMIT 1
            ) m`,
      [tenantId, keys.map((key) => key.partitionId), keys.map((key) => key.transactionId)],
    );
    return existingFrom(rows);
  }

  /**
   * The partitions' lock and the duplicate check in one round trip: the check names its partitions, so the lock's
   * rows need not come back first. It runs after the lock, as findExisting does.
   */
  async lockAndFindExisting(
    tenantId: string,
    lock: NamedStatement,
    keys: NamedTransactionKey[],
    manager: EntityManager,
  ): Promise<{ lockRows: LockNamedRow[]; existing: Map<string, string> }> {
    const [lockRows, found] = await this.engine.preparedTogether(manager, [
      lock,
      this.findExistingByNameStatement(tenantId, keys),
    ]);
    return { lockRows: lockRows as LockNamedRow[], existing: existingFrom(found as ExistingRow[]) };
  }

  /**
   * Each partition looked up once, not once an item: a partition's row is updated by every push, and its index entries
   * cost a lookup more than the message's. Then key by key with LIMIT 1, as findExisting.
   */
  findExistingByNameStatement(tenantId: string, keys: NamedTransactionKey[]): NamedStatement {
    return {
      name: 'leasehold_find_pushed_by_name',
      text: `WITH t AS MATERIALIZED (
         SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS t(queue_name, partition_name, transaction_id)
       ), named AS MATERIALIZED (
         SELECT n.queue_name, n.partition_name, p.id
           FROM (SELECT DISTINCT queue_name, partition_name FROM t) n
          CROSS JOIN LATERAL (
                SELECT p.id FROM queues q
                  JOIN partitions p ON p.tenant_id = q.tenant_id AND p.queue_id = q.id AND p.name = n.partition_name
                 WHERE q.tenant_id = $1 AND q.name = n.queue_name
                 LIMIT 1
              ) p
       )
       SELECT n.id AS partition_id, m.transaction_id, m.id
         FROM t
         JOIN named n ON n.queue_name = t.queue_name AND n.partition_name = t.partition_name
        CROSS JOIN LATERAL (
              SELECT m.transaction_id, m.id
                FROM messages m
               WHERE m.tenant_id = $1 AND m.partition_id = n.id AND m.transaction_id = t.transaction_id
               LIMIT 1
            ) m`,
      values: [
        tenantId,
        arrayLiteral(keys.map((key) => key.queue)),
        arrayLiteral(keys.map((key) => key.partition)),
        arrayLiteral(keys.map((key) => key.transactionId)),
      ],
    };
  }

  /**
   * created_at is clock_timestamp() under the partition lock, so it never decreases along a partition's offsets; one
   * instant per statement (an InitPlan), not per row: the embedded database's clock can step back within a
   * millisecond, which put a push's second message before its first. With `usage`, it also records what the unit
   * stores, as its last statement (usageCtes). `sealed`: some payloads are encrypted, and key_id is written too; a
   * push to plain queues leaves it out, and its statement is the same as before encryption existed.
   */
  insertStatement(
    tenantId: string,
    producerSub: string | null,
    messages: NewMessage[],
    lastOffsets: Map<string, number>,
    usage?: UsageRecord,
    sealed = false,
  ): NamedStatement {
    const usageParams = usage ? usageValues(usage) : [];
    const keyIds = `$${12 + usageParams.length}`;
    return {
      name: `${usage ? 'leasehold_store_pushed_recorded' : 'leasehold_store_pushed'}${sealed ? '_sealed' : ''}`,
      text: `WITH stored AS (
         INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes,
                               producer_sub, created_at${sealed ? ', key_id' : ''})
         SELECT $1, t.partition_id, t.seq, t.id, t.transaction_id, t.trace_id, t.payload, t.payload_bytes,
                $8, (SELECT clock_timestamp())${sealed ? ', t.key_id' : ''}
           FROM ROWS FROM (unnest($2::uuid[]), unnest($3::bigint[]), unnest($4::uuid[]), unnest($5::text[]),
                           unnest($6::text[]), json_array_elements($7::json), unnest($11::int[])${
                             sealed ? `, unnest(${keyIds}::text[])` : ''
                           })
             AS t(partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes${sealed ? ', key_id' : ''})
          ORDER BY t.partition_id, t.seq
       ), ${CURSORS_OF_PUSHED}${usage ? `, ${usageCtes('$1', 12)}` : ''}
       UPDATE partitions p SET last_offset = t.last_offset, last_pushed_at = now(),
                               retention_check_at = CASE WHEN p.last_offset = 0 THEN ${this.due}
                                                         ELSE LEAST(p.retention_check_at, ${this.due}) END
         FROM unnest($9::uuid[], $10::bigint[]) AS t(id, last_offset), queues q
        WHERE p.tenant_id = $1 AND p.id = t.id AND q.tenant_id = $1 AND q.id = p.queue_id`,
      values: [
        tenantId,
        arrayLiteral(messages.map((message) => message.partitionId)),
        arrayLiteral(messages.map((message) => message.seq)),
        arrayLiteral(messages.map((message) => message.id)),
        arrayLiteral(messages.map((message) => message.transactionId)),
        arrayLiteral(messages.map((message) => message.traceId)),
        payloadArray(messages),
        producerSub,
        arrayLiteral([...lastOffsets.keys()]),
        arrayLiteral([...lastOffsets.values()]),
        arrayLiteral(messages.map((message) => message.payloadBytes)),
        ...usageParams,
        ...(sealed ? [arrayLiteral(messages.map((message) => message.keyId))] : []),
      ],
    };
  }

  async run(statement: NamedStatement, manager: EntityManager): Promise<void> {
    await this.engine.runPrepared(manager, statement);
  }
}

/**
 * When the message just pushed may first be deleted by time alone: its queue's pending retention, eviction or ttl, as
 * retentionPolicy reads them (`defaultSeconds`: RETENTION_SECONDS; 0 or less turns a rule off); null when none
 * applies. Completed retention waits for the groups: the job hears of it from the cursors that move.
 */
function timeDue(defaultSeconds: number): string {
  const pending = `CASE WHEN q.retention_enabled IS DISTINCT FROM false
                        THEN NULLIF(GREATEST(COALESCE(q.retention_seconds, ${Math.trunc(defaultSeconds)}), 0), 0) END`;
  return `now() + make_interval(secs => LEAST(${pending}, NULLIF(GREATEST(q.max_wait_time_seconds, 0), 0),
                                            NULLIF(GREATEST(q.ttl_seconds, 0), 0)))`;
}

/**
 * One JSON text: a text[] of JSON would be escaped going out. json_array_elements hands on each element as the text
 * it is in the array, so each payload is stored as the producer wrote it (minified).
 */
function payloadArray(messages: NewMessage[]): string {
  return `[${messages.map((message) => message.payloadJson).join(',')}]`;
}

interface ExistingRow {
  partition_id: string;
  transaction_id: string;
  id: string;
}

function existingFrom(rows: ExistingRow[]): Map<string, string> {
  return new Map(rows.map((row) => [compositeKey(row.partition_id, row.transaction_id), row.id]));
}
