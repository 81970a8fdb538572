import { Inject, Injectable, Optional } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { compositeKey } from '../common/composite-key';
import { subscriptionStartOffset } from '../consumer-groups/subscription-start';
import { uuidv7 } from '../common/uuid';
import { groupLagCte, queueDepth, queueStoredCte } from '../consumer-groups/counters';
import { arrayLiteral } from '../database/array-literal';
import {
  ArrayType,
  NO_SQL,
  nothing,
  prepared,
  requestArrays,
  raw,
  shared,
  Sql,
  sql,
  Statement,
  statement,
  planAsAnyTenant,
  unsized,
} from '../database/statement';
import { TransactionKey, NamedTransactionKey } from '../message/message-shape';
import { usageCtes, UsageRecord } from '../limits/stored-usage.repository';

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
 * The queues a push holds key-share locked: each one's id by name, the maxSize of those that have one, and the ids of
 * those whose new payloads are encrypted.
 */
export interface QueueLocks {
  ids: Map<string, string>;
  maxSizes: Map<string, number>;
  encrypted: Set<string>;
}

export interface LockedPartition {
  id: string;
  queueId: string;
  name: string;
  lastOffset: number;
}

export type NamedLocks = QueueLocks & { locked: LockedPartition[] };

/**
 * Every group of a pushed partition's queue gets something to read there: its drained cursors are marked ready (the
 * partition is locked, so no ack can unmark them before this commits), and a group with no cursor there gets one at
 * its starting point, which this statement's snapshot computes from the messages before this push.
 */
function cursorsOfPushed(tenant: Sql, partitionIds: Sql, lastOffsets: Sql): Sql {
  // One lookup by key per partition pushed to (LIMIT 1 keeps it a lookup): with statistics older than the tenant's
  // growth, a plain filter by id was planned as a scan of all the tenant's partitions.
  return sql`pushed AS MATERIALIZED (
    SELECT p.tenant_id, p.id, p.queue_id, p.last_offset
      FROM unnest(${partitionIds}) AS t(id)
     CROSS JOIN LATERAL (
           SELECT p.tenant_id, p.id, p.queue_id, p.last_offset FROM partitions p
            WHERE p.tenant_id = ${tenant} AND p.id = t.id LIMIT 1
         ) p
  ), cursors AS MATERIALIZED (
    SELECT c.partition_id, c.consumer_group, c.ready FROM consumers c
     WHERE c.tenant_id = ${tenant} AND c.partition_id = ANY(${partitionIds})
  ), readied AS (
    UPDATE consumers c SET ready = true
      FROM cursors k
     WHERE c.tenant_id = ${tenant} AND c.partition_id = k.partition_id AND c.consumer_group = k.consumer_group AND NOT k.ready
  ), uncovered AS MATERIALIZED (
    SELECT p.tenant_id, p.id, p.queue_id, p.last_offset, g.name, g.subscription_from
      FROM pushed p
      JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id
     -- Looked up by key, not in \`cursors\`: a CTE has no index, and 10,000 pushed partitions against 10,000 cursors
     -- were 50 million comparisons. The statement's one snapshot makes both the same rows.
     WHERE NOT EXISTS (SELECT 1 FROM consumers k
                        WHERE k.tenant_id = p.tenant_id AND k.partition_id = p.id AND k.consumer_group = g.name)
  ), created AS (
    INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
    SELECT u.tenant_id, u.queue_id, u.id, u.name, s.start_offset, s.start_offset
      FROM uncovered u
     CROSS JOIN LATERAL (SELECT ${raw(subscriptionStartOffset('u', 'u'))} AS start_offset) s
     ORDER BY u.id, u.name
    ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING
    RETURNING partition_id, consumer_group, committed_offset
  ), grown AS MATERIALIZED (
    SELECT p.tenant_id, p.queue_id, p.id, t.last_offset, t.last_offset - p.last_offset AS added
      FROM pushed p JOIN unnest(${partitionIds}, ${lastOffsets}) AS t(id, last_offset) ON t.id = p.id
  )`;
}

/** The partitions a push created, per queue (createPartitions), as rows of tenant_id, queue_id and partitions. */
function newPartitions(tenant: Sql, created: ReadonlyMap<string, number>): Sql {
  return sql`new_partitions AS (
    SELECT ${tenant} AS tenant_id, n.queue_id, n.partitions
      FROM unnest(${unsized([...created.keys()], 'uuid[]')}, ${unsized([...created.values()], 'int[]')}) AS n(queue_id, partitions)
  )`;
}

/**
 * The push's counters, after its usage (usageCtes) in the statement's text: PostgreSQL runs the data-modifying CTEs no
 * one reads last-written first, so group_lag, then queue_stored, then tenant_usage, the order every write takes its
 * stripe's rows in (acks and claims, first in a transaction, take group_lag only). Taken in two orders, two
 * connections on one stripe deadlocked (test/counters). `new_partitions`: those this push created (createPartitions).
 */
const STORED_AND_LAG_OF_GROWN = `${queueStoredCte(
  'stored_counted',
  `SELECT tenant_id, queue_id, added AS messages, 0 AS partitions, added AS offsets FROM grown
   UNION ALL SELECT tenant_id, queue_id, 0, partitions, 0 FROM new_partitions`,
)}, ${groupLagCte(
  'lag_counted',
  // A cursor made by this push lags from its starting point; any other, this push's messages. One another
  // transaction made meanwhile (the insert found it) started before this push committed, so counted without them.
  `SELECT g.tenant_id, g.queue_id, k.name AS consumer_group,
          CASE WHEN c.partition_id IS NULL THEN g.added ELSE g.last_offset - c.committed_offset END AS lag
     FROM grown g
     JOIN consumer_groups k ON k.tenant_id = g.tenant_id AND k.queue_id = g.queue_id
     LEFT JOIN created c ON c.partition_id = g.id AND c.consumer_group = k.name`,
)}`;

/** Every statement of a push, from locking its partitions to storing its messages; PushService runs them. */
@Injectable()
export class PushRepository {
  /** What time alone makes deletable in a pushed partition (pending retention, eviction), as SQL over queue `q`. */
  private readonly due: string;

  constructor(@Optional() @Inject(APP_CONFIG) config?: AppConfig) {
    this.due = timeDue(config?.retention.pendingSeconds ?? 0);
  }

  /**
   * The usual push in one statement: its queues key-share locked and its partitions locked, when all exist
   * (undefined otherwise: lockQueues and lockPartitions then create what is missing). Partitions in primary-key order.
   * Each partition is found by its key alone and then locked by id: joined instead, a planner without fresh statistics
   * reads the tenant's every partition of the queue (test/pop-ack-plans). The lock names both unique keys whole: by
   * id alone, a custom plan for a tenant the statistics never saw may take the name index with the tenant as its only
   * bound, and read every partition of the tenant for each one it locks (test/push-plans-wide).
   */
  lockNamed(tenantId: string, named: Map<string, Map<string, unknown>>): Statement<NamedLocks | undefined> {
    const tenant = shared(tenantId);
    const queueNames: string[] = [];
    const partitionNames: string[] = [];
    for (const [queue, partitions] of named) {
      for (const partition of partitions.keys()) {
        queueNames.push(queue);
        partitionNames.push(partition);
      }
    }
    const { array, name } = requestArrays(queueNames.length, 'leasehold_lock_named');
    return prepared(
      name,
      sql`WITH q AS MATERIALIZED (
         SELECT id, name, max_size, encryption_enabled FROM queues
          WHERE tenant_id = ${tenant} AND name = ANY(${array(arrayLiteral([...named.keys()]), 'text[]')})
          ORDER BY name FOR KEY SHARE
       ), found AS MATERIALIZED (
         SELECT q.id AS queue_id, q.name AS queue_name, q.max_size, q.encryption_enabled, f.id, t.name
           FROM unnest(${array(arrayLiteral(queueNames), 'text[]')}, ${array(arrayLiteral(partitionNames), 'text[]')}) AS t(queue_name, name)
           JOIN q ON q.name = t.queue_name
          CROSS JOIN LATERAL (
                SELECT p.id FROM partitions p WHERE p.tenant_id = ${tenant} AND p.queue_id = q.id AND p.name = t.name LIMIT 1
              ) f
       )
       SELECT f.queue_id, f.queue_name, f.max_size, f.encryption_enabled, p.id, p.name, p.last_offset
         FROM (SELECT * FROM found ORDER BY id) f
        CROSS JOIN LATERAL (
              SELECT p.id, p.name, p.last_offset FROM partitions p
               WHERE p.tenant_id = ${tenant} AND p.id = f.id AND p.queue_id = f.queue_id AND p.name = f.name
                 FOR NO KEY UPDATE
            ) p
        ORDER BY p.id`,
      (rows: LockNamedRow[]) => (rows.length === queueNames.length ? lockedNamed(rows) : undefined),
    );
  }

  /** Key-share locked so none can be deleted before this transaction commits. */
  lockQueues(tenantId: string, names: string[]): Statement<QueueLocks> {
    return prepared(
      'leasehold_lock_queues',
      sql`SELECT id, name, max_size, encryption_enabled FROM queues WHERE tenant_id = ${tenantId} AND name = ANY(${names}::text[])
           ORDER BY name FOR KEY SHARE`,
      queueLocks,
    );
  }

  /** Inserted in name order so concurrent first pushes cannot deadlock; answers how many were created. */
  createQueues(tenantId: string, names: string[]): Statement<number> {
    return statement(
      sql`WITH created AS (
         INSERT INTO queues (tenant_id, id, name)
         SELECT ${tenantId}, t.id, t.name FROM unnest(${names.map(() => uuidv7())}::uuid[], ${names}::text[]) AS t(id, name)
          ORDER BY t.name
         ON CONFLICT (tenant_id, name) DO NOTHING
         RETURNING 1
       )
       SELECT count(*)::int AS created FROM created`,
      countCreated,
    );
  }

  /**
   * FOR NO KEY UPDATE, not FOR UPDATE: pops creating consumer rows take a key-share lock through the foreign key. Found
   * key by key, then locked in primary-key order (lockNamed: the same, for the same reason).
   */
  lockPartitions(tenantId: string, partitions: Array<{ queueId: string; name: string }>): Statement<LockedPartition[]> {
    const tenant = shared(tenantId);
    return prepared(
      'leasehold_lock_partitions',
      sql`SELECT p.id, p.queue_id, p.name, p.last_offset
         FROM (SELECT f.id, t.queue_id, t.name
                 FROM unnest(${unsized(
                   partitions.map((partition) => partition.queueId),
                   'uuid[]',
                 )}, ${unsized(
                   partitions.map((partition) => partition.name),
                   'text[]',
                 )}) AS t(queue_id, name)
                CROSS JOIN LATERAL (
                      SELECT p.id FROM partitions p
                       WHERE p.tenant_id = ${tenant} AND p.queue_id = t.queue_id AND p.name = t.name
                       LIMIT 1
                    ) f
                ORDER BY f.id) f
        CROSS JOIN LATERAL (
              SELECT p.id, p.queue_id, p.name, p.last_offset FROM partitions p
               WHERE p.tenant_id = ${tenant} AND p.id = f.id AND p.queue_id = f.queue_id AND p.name = f.name
                 FOR NO KEY UPDATE
            ) p
        ORDER BY p.id`,
      (rows: Array<{ id: string; queue_id: string; name: string; last_offset: string }>) =>
        rows.map((row) => ({ id: row.id, queueId: row.queue_id, name: row.name, lastOffset: Number(row.last_offset) })),
    );
  }

  /**
   * No cursors: the push that creates a partition gives each group of its queue one (store). Per queue, how many it
   * created; counted by the store (or countPartitions), so that a push takes its counters in one statement's order.
   */
  createPartitions(
    tenantId: string,
    partitions: Array<{ queueId: string; name: string }>,
  ): Statement<Map<string, number>> {
    const tenant = shared(tenantId);
    return statement(
      sql`WITH created AS (
         INSERT INTO partitions (tenant_id, id, queue_id, name)
         SELECT ${tenant}, t.id, t.queue_id, t.name
           FROM unnest(${partitions.map(() => uuidv7())}::uuid[], ${partitions.map((partition) => partition.queueId)}::uuid[],
                       ${partitions.map((partition) => partition.name)}::text[]) AS t(id, queue_id, name)
          ORDER BY t.queue_id, t.name
         ON CONFLICT (tenant_id, queue_id, name) DO NOTHING
         RETURNING queue_id
       )
       SELECT queue_id, count(*)::int AS created FROM created GROUP BY queue_id`,
      (rows: Array<{ queue_id: string; created: number }>) => new Map(rows.map((row) => [row.queue_id, row.created])),
    );
  }

  /** The partitions a push created, when it stores nothing (a full queue): otherwise its store counts them. */
  countPartitions(tenantId: string, createdPartitions: ReadonlyMap<string, number>): Statement<void> {
    return statement(
      sql`WITH ${newPartitions(sql`${tenantId}::uuid`, createdPartitions)}, ${raw(
        queueStoredCte(
          'stored_counted',
          'SELECT tenant_id, queue_id, 0 AS messages, partitions, 0 AS offsets FROM new_partitions',
        ),
      )}
       SELECT 1`,
      nothing,
    );
  }

  /** Per queue id, its depth (queueDepth): what maxSize holds it to, read from the counters, not its partitions. */
  pending(tenantId: string, queueIds: string[]): Statement<Map<string, number>> {
    return statement(
      sql`SELECT q.id AS queue_id, ${raw(queueDepth('q'))} AS pending FROM queues q
        WHERE q.tenant_id = ${tenantId} AND q.id = ANY(${queueIds}::uuid[])`,
      (rows: Array<{ queue_id: string; pending: string }>) =>
        new Map(rows.map((row) => [row.queue_id, Number(row.pending)])),
    );
  }

  /**
   * Looked up key by key: joined instead, a planner without fresh statistics scans the tenant's every message.
   * LIMIT keeps the lateral from being flattened into that join (the pair is unique).
   */
  findExisting(tenantId: string, keys: TransactionKey[]): Statement<Map<string, string>> {
    return prepared(
      'leasehold_find_pushed',
      sql`SELECT m.partition_id, m.transaction_id, m.id
         FROM unnest(${unsized(
           keys.map((key) => key.partitionId),
           'uuid[]',
         )}, ${unsized(
           keys.map((key) => key.transactionId),
           'text[]',
         )}) AS t(partition_id, transaction_id)
        CROSS JOIN LATERAL (
              SELECT m.partition_id, m.transaction_id, m.id
                FROM messages m
               WHERE m.tenant_id = ${tenantId} AND m.partition_id = t.partition_id AND m.transaction_id = t.transaction_id
               LIMIT 1
            ) m`,
      existingFrom,
    );
  }

  /**
   * As findExisting, with partitions named: it needs no rows of the lock, so it can share the lock's round trip (and
   * runs after it). Each partition looked up once, not once an item: a partition's row is updated by every push, and
   * its index entries cost a lookup more than the message's.
   */
  findExistingByName(tenantId: string, keys: NamedTransactionKey[]): Statement<Map<string, string>> {
    const tenant = planAsAnyTenant(shared(tenantId));
    const { array, name } = requestArrays(keys.length, 'leasehold_find_pushed_by_name');
    return prepared(
      name,
      sql`WITH t AS MATERIALIZED (
         SELECT * FROM unnest(${array(arrayLiteral(keys.map((key) => key.queue)), 'text[]')},
                              ${array(arrayLiteral(keys.map((key) => key.partition)), 'text[]')},
                              ${array(arrayLiteral(keys.map((key) => key.transactionId)), 'text[]')})
           AS t(queue_name, partition_name, transaction_id)
       ), named AS MATERIALIZED (
         SELECT n.queue_name, n.partition_name, p.id
           FROM (SELECT DISTINCT queue_name, partition_name FROM t) n
          CROSS JOIN LATERAL (
                SELECT p.id FROM queues q
                  JOIN partitions p ON p.tenant_id = q.tenant_id AND p.queue_id = q.id AND p.name = n.partition_name
                 WHERE q.tenant_id = ${tenant} AND q.name = n.queue_name
                 LIMIT 1
              ) p
       )
       SELECT n.id AS partition_id, m.transaction_id, m.id
         FROM t
         JOIN named n ON n.queue_name = t.queue_name AND n.partition_name = t.partition_name
        CROSS JOIN LATERAL (
              SELECT m.transaction_id, m.id
                FROM messages m
               WHERE m.tenant_id = ${tenant} AND m.partition_id = n.id AND m.transaction_id = t.transaction_id
               LIMIT 1
            ) m`,
      existingFrom,
    );
  }

  /**
   * created_at is clock_timestamp() under the partition lock, so it never decreases along a partition's offsets; one
   * instant per statement (an InitPlan), not per row: the embedded database's clock can step back within a
   * millisecond, which put a push's second message before its first. With `usage`, it also records what the unit
   * stores, as its last statement (usageCtes). `sealed`: some payloads are encrypted, and key_id is written too; a
   * push to plain queues leaves it out, and its statement is the same as before encryption existed.
   */
  store(
    tenantId: string,
    producerSub: string | null,
    messages: NewMessage[],
    lastOffsets: Map<string, number>,
    usage?: UsageRecord,
    sealed = false,
    createdPartitions: ReadonlyMap<string, number> = new Map(),
  ): Statement<void> {
    const tenant = shared(tenantId);
    const tenantKey = planAsAnyTenant(tenant);
    const partitionIds = shared(arrayLiteral([...lastOffsets.keys()]));
    const offsets = shared(arrayLiteral([...lastOffsets.values()]));
    const keyId = sealed ? raw(', key_id') : NO_SQL;
    const { array, name } = requestArrays(
      messages.length,
      `${usage ? 'leasehold_store_pushed_recorded' : 'leasehold_store_pushed'}${sealed ? '_sealed' : ''}`,
    );
    const column = (key: keyof NewMessage, type: ArrayType) =>
      array(arrayLiteral(messages.map((message) => message[key])), type);
    return prepared(
      name,
      sql`WITH stored AS (
         INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes,
                               producer_sub, created_at${keyId})
         SELECT ${tenant}, t.partition_id, t.seq, t.id, t.transaction_id, t.trace_id, t.payload, t.payload_bytes,
                ${producerSub}, (SELECT clock_timestamp())${sealed ? raw(', t.key_id') : NO_SQL}
           FROM ROWS FROM (unnest(${column('partitionId', 'uuid[]')}),
                           unnest(${column('seq', 'bigint[]')}),
                           unnest(${column('id', 'uuid[]')}),
                           unnest(${column('transactionId', 'text[]')}),
                           unnest(${column('traceId', 'text[]')}),
                           json_array_elements(${payloadArray(messages)}::json),
                           unnest(${column('payloadBytes', 'int[]')})${
                             sealed ? sql`, unnest(${column('keyId', 'text[]')})` : NO_SQL
                           })
             AS t(partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes${keyId})
          ORDER BY t.partition_id, t.seq
       ), ${cursorsOfPushed(tenantKey, array(partitionIds, 'uuid[]'), array(offsets, 'bigint[]'))}${
         usage ? sql`, ${usageCtes(tenant, usage)}` : NO_SQL
       }, ${newPartitions(tenantKey, createdPartitions)}, ${raw(STORED_AND_LAG_OF_GROWN)}
       UPDATE partitions p SET last_offset = g.last_offset, last_pushed_at = now(),
                               retention_check_at = CASE WHEN p.last_offset = 0 THEN ${raw(this.due)}
                                                         ELSE LEAST(p.retention_check_at, ${raw(this.due)}) END
         FROM grown g, queues q
        WHERE p.tenant_id = ${tenantKey} AND p.id = g.id AND q.tenant_id = ${tenantKey} AND q.id = g.queue_id`,
      nothing,
    );
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

interface LockNamedRow {
  queue_id: string;
  queue_name: string;
  max_size: number | null;
  encryption_enabled: boolean;
  id: string;
  name: string;
  last_offset: string;
}

interface QueueLockRow {
  id: string;
  name: string;
  max_size: number | null;
  encryption_enabled: boolean;
}

function queueLocks(rows: QueueLockRow[]): QueueLocks {
  const capped = rows.filter((row) => row.max_size !== null && row.max_size > 0);
  return {
    ids: new Map(rows.map((row) => [row.name, row.id])),
    maxSizes: new Map(capped.map((row) => [row.id, row.max_size!])),
    encrypted: new Set(rows.filter((row) => row.encryption_enabled).map((row) => row.id)),
  };
}

function lockedNamed(rows: LockNamedRow[]): NamedLocks {
  return {
    ...queueLocks(
      rows.map((row) => ({
        id: row.queue_id,
        name: row.queue_name,
        max_size: row.max_size,
        encryption_enabled: row.encryption_enabled,
      })),
    ),
    locked: rows.map((row) => ({
      id: row.id,
      queueId: row.queue_id,
      name: row.name,
      lastOffset: Number(row.last_offset),
    })),
  };
}

function countCreated([row]: Array<{ created: number }>): number {
  return row.created;
}
