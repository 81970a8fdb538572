import { Injectable } from '@nestjs/common';
import { isoTimestamp } from '../common/sql-timestamp';
import { GroupTotals, groupKey, groupTotals } from '../consumer-groups/consumer-groups.repository';
import { QueueStoredRow, queueStoredOfQueues } from '../consumer-groups/counters';
import { subscriptionStartOffset } from '../consumer-groups/subscription-start';
import { uuidv7 } from '../common/uuid';
import { nothing, raw, Shared, shared, Sql, sql, Statement, statement } from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { RetentionRow, retentionColumns, StoredRetention, storedRetentionOf } from '../retention/retention-policy';
import {
  optionColumns,
  QUEUE_OPTIONS,
  QueueOptionRow,
  RetentionSettings,
  SentOptions,
  StoredOptions,
  storedOptionsOf,
} from './queue-options';
import { LEASE_HINT_CHARS, LeaseListDto } from './dto/lease-list.dto';
import { storedBytes, UsageChange } from '../limits/stored-usage.repository';

export interface QueueRecord {
  id: string;
  name: string;
  /** Every option by key, as stored (QUEUE_OPTIONS). */
  options: StoredOptions;
  namespace: string | null;
  task: string | null;
  retention: StoredRetention;
  /** Options stored before the broker refused those it does not implement, still shown. */
  extraOptions: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export interface QueueSettings {
  /** Options not sent keep their value; a retention option sent as null resets it to the broker's default. */
  options: SentOptions;
  /** "" removes it. */
  namespace?: string;
  task?: string;
  /** The retention ones among the options. */
  retention: RetentionSettings;
}

export type QueueSummary = QueueRecord & QueueTotals;

export interface QueueTotals {
  partitions: number;
  messages: number;
  /** Messages not yet consumed by the slowest consumer group (all kept ones when there is none). */
  pending: number;
  /** Messages still stored (retention deletes the rest). */
  retained: number;
  deadLetters: number;
  consumerGroups: number;
}

export interface QueueListEntry {
  id: string;
  name: string;
  answerBytes: number;
}

export interface ConsumerGroupTotals {
  consumerGroup: string;
  subscriptionFrom: string | null;
  lag: number;
  liveLeases: number;
}

export interface PartitionStats {
  id: string;
  name: string;
  messages: number;
  createdAt: string;
}

export interface ConsumerStats {
  consumerGroup: string;
  subscriptionFrom: string | null;
  partitionId: string;
  partition: string;
  committedOffset: number;
  lag: number;
  leased: boolean;
  leaseExpiresAt: string | null;
  retryCount: number;
  deliveryAttempt: number;
}

interface QueueRow extends QueueOptionRow {
  id: string;
  name: string;
  namespace: string | null;
  task: string | null;
  options: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

const NO_QUEUE_TOTALS: QueueTotals = {
  partitions: 0,
  messages: 0,
  pending: 0,
  retained: 0,
  deadLetters: 0,
  consumerGroups: 0,
};

/** What a queue's entry in a listing adds besides its name and options: keys, counts, timestamps. */
const QUEUE_ENTRY_BYTES = 300;

const QUEUE_COLUMNS = `q.id, q.name, ${optionColumns('q')}, q.namespace, q.task, q.options,
  ${isoTimestamp('q.created_at')} AS created_at, ${isoTimestamp('q.updated_at')} AS updated_at`;

/** Each option from configure's options (a JSON object of those sent): absent keeps the value, null resets a retention one. */
function optionAssignments(options: Shared<string>): Sql {
  const assignments = QUEUE_OPTIONS.map((option) => {
    const [column, key, type] = [raw(option.column), raw(option.key), raw(option.type)];
    const sent = sql`(${options}::jsonb ->> '${key}')::${type}`;
    return option.retention
      ? sql`${column} = CASE WHEN ${options}::jsonb ? '${key}' THEN ${sent} ELSE ${column} END`
      : sql`${column} = COALESCE(${sent}, ${column})`;
  });
  return new Sql(assignments.map((_, index) => (index === 0 ? '' : ',\n                ')).concat(''), assignments);
}

@Injectable()
export class QueuesRepository {
  find(tenantId: string, name: string): Statement<QueueRecord | undefined> {
    return statement(
      sql`SELECT ${raw(QUEUE_COLUMNS)} FROM queues q WHERE q.tenant_id = ${tenantId} AND q.name = ${name}`,
      (rows: QueueRow[]) => (rows.length > 0 ? toQueue(rows[0]) : undefined),
    );
  }

  partitionId(tenantId: string, queueId: string, name: string): Statement<string | undefined> {
    return statement(
      sql`SELECT id FROM partitions WHERE tenant_id = ${tenantId} AND queue_id = ${queueId} AND name = ${name}`,
      (rows: Array<{ id: string }>) => rows[0]?.id,
    );
  }

  /** Takes the row lock, so that the queue cannot vanish before configure() updates it; answers its retention then. */
  upsert(tenantId: string, name: string): Statement<{ id: string; created: boolean; retention: StoredRetention }> {
    return statement(
      sql`INSERT INTO queues AS q (tenant_id, id, name) VALUES (${tenantId}, ${uuidv7()}, ${name})
       ON CONFLICT (tenant_id, name) DO UPDATE SET updated_at = now()
       RETURNING q.id, q.xmax = 0 AS created, ${raw(retentionColumns('q'))}`,
      ([row]: Array<RetentionRow & { id: string; created: boolean }>) => ({
        id: row.id,
        created: row.created,
        retention: storedRetentionOf(row),
      }),
    );
  }

  /** One probe of the due-partition index (see QueueListDto.retentionLagSeconds); a check of -infinity is due now. */
  retentionLagSeconds(tenantId: string): Statement<number> {
    return statement(
      sql`SELECT COALESCE(CASE WHEN isfinite(d.due_at) THEN extract(epoch FROM clock_timestamp() - d.due_at) END, 0)::float8
                AS lag
         FROM (SELECT min(p.retention_check_at) AS due_at FROM partitions p
                WHERE p.tenant_id = ${tenantId} AND p.retention_check_at <= clock_timestamp()) d`,
      ([row]: Array<{ lag: number }>) => Math.max(0, Math.round(row.lag * 10) / 10),
    );
  }

  /**
   * After a queue's retention settings change, the retention job looks at each of its partitions again, a batch at a
   * time from the first (RetentionRepository.spreadRechecks): not here, where a million partitions would not fit in
   * the request's statement timeout. A change while one is under way starts it over.
   */
  recheckRetention(tenantId: string, name: string): Statement<void> {
    return statement(
      sql`UPDATE queues SET retention_recheck_from = '' WHERE tenant_id = ${tenantId} AND name = ${name}`,
      nothing,
    );
  }

  /** Applies the given settings to a queue this transaction holds (see upsert); unset ones keep their value. */
  configure(tenantId: string, name: string, settings: QueueSettings): Statement<QueueRecord> {
    const namespace = shared(settings.namespace ?? null);
    const task = shared(settings.task ?? null);
    return statement(
      sql`WITH q AS (
         UPDATE queues
            SET ${optionAssignments(shared(JSON.stringify(settings.options)))},
                namespace = CASE WHEN ${namespace}::text IS NULL THEN namespace ELSE NULLIF(${namespace}, '') END,
                task = CASE WHEN ${task}::text IS NULL THEN task ELSE NULLIF(${task}, '') END,
                updated_at = now()
          WHERE tenant_id = ${tenantId} AND name = ${name}
         RETURNING *
       )
       SELECT ${raw(QUEUE_COLUMNS)} FROM q`,
      (rows: QueueRow[]) => toQueue(rows[0]),
    );
  }

  /**
   * Consumer rows are locked first, in primary-key order, as acks and renewals lock them before the queue row (an ack's
   * dead letter references it); the cascade alone would take the queue row first, and the two would deadlock. Then
   * the queue row, so that no push or dead letter adds to it any more; its messages and dead letters are deleted by
   * name rather than by the cascade, to count exactly what goes (the retention job may be deleting some meanwhile).
   */
  async delete(unit: StatementReader, tenantId: string, name: string): Promise<UsageChange | undefined> {
    await unit.run(
      statement(
        sql`SELECT 1
         FROM consumers c
         JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE c.tenant_id = ${tenantId} AND q.name = ${name}
        ORDER BY c.tenant_id, c.partition_id, c.consumer_group
          FOR UPDATE OF c`,
        nothing,
      ),
    );
    const queueId = await unit.run(
      statement(
        sql`SELECT id FROM queues WHERE tenant_id = ${tenantId} AND name = ${name} FOR UPDATE`,
        (rows: Array<{ id: string }>) => rows[0]?.id,
      ),
    );
    if (queueId === undefined) return undefined;
    const [tenant, queue] = [tenantId, queueId].map(shared);
    return unit.run(
      statement(
        sql`WITH messages_gone AS (
         DELETE FROM messages m USING partitions p
          WHERE p.tenant_id = ${tenant} AND p.queue_id = ${queue} AND m.tenant_id = p.tenant_id AND m.partition_id = p.id
         RETURNING ${raw(storedBytes('m'))} AS bytes
       ), letters_gone AS (
         DELETE FROM dead_letters d WHERE d.tenant_id = ${tenant} AND d.queue_id = ${queue}
         RETURNING ${raw(storedBytes('d'))} AS bytes
       ), gone AS (
         DELETE FROM queues WHERE tenant_id = ${tenant} AND id = ${queue}
       ), stored_gone AS (
         -- Written before lag_gone, so it runs after it: the counters' order (docs/internals.md).
         DELETE FROM queue_stored WHERE tenant_id = ${tenant} AND queue_id = ${queue}
       ), lag_gone AS (
         DELETE FROM group_lag WHERE tenant_id = ${tenant} AND queue_id = ${queue}
       ), state_gone AS (
         DELETE FROM stream_state s USING stream_queries sq
          WHERE sq.tenant_id = ${tenant} AND sq.source_queue_id = ${queue} AND s.tenant_id = sq.tenant_id AND s.query_id = sq.id
         RETURNING s.bytes
       ), freed AS (
         SELECT bytes FROM messages_gone UNION ALL SELECT bytes FROM letters_gone UNION ALL SELECT bytes FROM state_gone
       )
       SELECT count(*)::int AS messages, COALESCE(sum(bytes), 0) AS bytes FROM freed`,
        ([row]: Array<{ messages: number; bytes: string }>) => ({ bytes: Number(row.bytes), messages: row.messages }),
      ),
    );
  }

  /** Each with the running size of a listing ending with it: the caller cuts the page where it would grow too large. */
  listPage(tenantId: string, after: string | undefined, limit: number): Statement<QueueListEntry[]> {
    const from = shared(after ?? null);
    return statement(
      sql`SELECT page.id, page.name,
              sum(octet_length(page.options::text) + octet_length(page.name) + ${raw(String(QUEUE_ENTRY_BYTES))})
                OVER (ORDER BY page.name) AS answer_bytes
         FROM (SELECT id, name, options FROM queues
                WHERE tenant_id = ${tenantId} AND (${from}::text IS NULL OR name > ${from})
                ORDER BY name LIMIT ${limit}) page
        ORDER BY page.name`,
      (rows: Array<{ id: string; name: string; answer_bytes: string }>) =>
        rows.map((row) => ({ id: row.id, name: row.name, answerBytes: Number(row.answer_bytes) })),
    );
  }

  summaries(
    reader: StatementReader,
    tenantId: string,
    name: string | undefined,
    ids?: string[],
  ): Promise<QueueSummary[]> {
    return this.summariesWithGroups(reader, tenantId, name, ids).then(({ summaries }) => summaries);
  }

  /** The summaries and the groups' totals they were computed from, which the queue's detail shows as well. */
  async summariesWithGroups(
    reader: StatementReader,
    tenantId: string,
    name: string | undefined,
    ids?: string[],
  ): Promise<{ summaries: QueueSummary[]; groups: Map<string, GroupTotals> }> {
    const named = shared(name ?? null);
    const among = shared(ids ?? null);
    const rows = await reader.run(
      statement(
        sql`SELECT ${raw(QUEUE_COLUMNS)} FROM queues q
        WHERE q.tenant_id = ${tenantId} AND (${named}::text IS NULL OR q.name = ${named}) AND (${among}::uuid[] IS NULL OR q.id = ANY(${among}))
        ORDER BY q.name`,
        (found: QueueRow[]) => found,
      ),
    );
    const queueIds = rows.map((row) => row.id);
    const groups = await groupTotals(reader, tenantId, queueIds);
    const totals = await this.queueTotals(reader, tenantId, queueIds, groups);
    return {
      summaries: rows.map((row) => ({ ...toQueue(row), ...(totals.get(row.id) ?? NO_QUEUE_TOTALS) })),
      groups,
    };
  }

  /**
   * Each queue's counts, the one place they are computed. Stored messages come from the queue_stored counters and
   * the groups' lag from groupTotals; pending is the lag of the furthest-behind group, or what the queue stores when it
   * has no group, as the depth metric; partitions and messages ever stored (the sum of the partitions' last offsets)
   * from the same counters. Only dead letters are counted here.
   */
  async queueTotals(
    reader: StatementReader,
    tenantId: string,
    queueIds: string[],
    lags: Map<string, GroupTotals>,
  ): Promise<Map<string, QueueTotals>> {
    if (queueIds.length === 0) return new Map();
    const rows = await reader.run(
      statement(
        sql`SELECT q.id,
              (SELECT count(*)::int FROM dead_letters d
                WHERE d.tenant_id = q.tenant_id AND d.queue_id = q.id) AS dead_letters,
              ARRAY(SELECT g.name FROM consumer_groups g WHERE g.tenant_id = q.tenant_id AND g.queue_id = q.id) AS groups
         FROM queues q
        WHERE q.tenant_id = ${tenantId} AND q.id = ANY(${queueIds}::uuid[])`,
        (found: Array<{ id: string; dead_letters: number; groups: string[] }>) => found,
      ),
    );
    const countersOf = await reader.run(
      statement(
        queueStoredOfQueues(tenantId, queueIds),
        (stored: QueueStoredRow[]) => new Map(stored.map((row) => [row.queue_id, row])),
      ),
    );
    return new Map(
      rows.map((row) => {
        const counters = countersOf.get(row.id);
        const retained = Number(counters?.messages ?? 0);
        const behind = row.groups.map((group) => lags.get(groupKey(row.id, group))?.totalLag ?? 0);
        return [
          row.id,
          {
            partitions: Number(counters?.partitions ?? 0),
            messages: Number(counters?.offsets ?? 0),
            pending: behind.length === 0 ? retained : Math.max(...behind),
            retained,
            deadLetters: row.dead_letters,
            consumerGroups: row.groups.length,
          },
        ];
      }),
    );
  }

  /** A page of partitions by name, after `after`; one more than `limit` tells whether there are more. */
  partitionStats(
    tenantId: string,
    queueId: string,
    after: string | undefined,
    limit: number,
  ): Statement<PartitionStats[]> {
    const from = shared(after ?? null);
    return statement(
      sql`SELECT id, name, last_offset, ${raw(isoTimestamp('created_at'))} AS created_at
         FROM partitions WHERE tenant_id = ${tenantId} AND queue_id = ${queueId} AND (${from}::text IS NULL OR name > ${from})
        ORDER BY name LIMIT ${limit}`,
      (rows: Array<{ id: string; name: string; last_offset: string; created_at: string }>) =>
        rows.map((row) => ({
          id: row.id,
          name: row.name,
          messages: Number(row.last_offset),
          createdAt: row.created_at,
        })),
    );
  }

  /** `totals`: groupTotals of this queue, as summariesWithGroups answered them. */
  consumerGroupTotals(
    tenantId: string,
    queueId: string,
    totals: Map<string, GroupTotals>,
  ): Statement<ConsumerGroupTotals[]> {
    return statement(
      sql`SELECT g.name AS consumer_group, ${raw(isoTimestamp('g.subscription_from'))} AS subscription_from
         FROM consumer_groups g WHERE g.tenant_id = ${tenantId} AND g.queue_id = ${queueId} ORDER BY g.name`,
      (rows: Array<{ consumer_group: string; subscription_from: string | null }>) =>
        rows.map((row) => {
          const sums = totals.get(groupKey(queueId, row.consumer_group));
          return {
            consumerGroup: row.consumer_group,
            subscriptionFrom: row.subscription_from,
            lag: sums?.totalLag ?? 0,
            liveLeases: sums?.liveLeases ?? 0,
          };
        }),
    );
  }

  /** Never the lease id; a partition the group has not popped from yet shows where the group would start. */
  consumerStats(tenantId: string, queueId: string, partitionIds: string[]): Statement<ConsumerStats[]> {
    return statement(
      sql`SELECT g.name AS consumer_group, ${raw(isoTimestamp('g.subscription_from'))} AS subscription_from,
              p.id AS partition_id, p.name AS partition, s.committed_offset, p.last_offset - s.committed_offset AS lag,
              COALESCE(c.lease_expires_at > now(), false) AS leased,
              CASE WHEN c.lease_expires_at > now() THEN ${raw(isoTimestamp('c.lease_expires_at'))} END AS lease_expires_at,
              COALESCE(c.retry_count, 0) AS retry_count, COALESCE(c.delivery_attempt, 0) AS delivery_attempt
         FROM consumer_groups g
         JOIN partitions p ON p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id
         LEFT JOIN consumers c ON c.tenant_id = p.tenant_id AND c.partition_id = p.id AND c.consumer_group = g.name
        CROSS JOIN LATERAL (
              SELECT COALESCE(c.committed_offset, ${raw(subscriptionStartOffset('p', 'g'))}) AS committed_offset) s
        WHERE g.tenant_id = ${tenantId} AND g.queue_id = ${queueId} AND p.id = ANY(${partitionIds}::uuid[])
        ORDER BY g.name, p.name`,
      (
        rows: Array<{
          consumer_group: string;
          subscription_from: string | null;
          partition_id: string;
          partition: string;
          committed_offset: string;
          lag: string;
          leased: boolean;
          lease_expires_at: string | null;
          retry_count: number;
          delivery_attempt: number;
        }>,
      ) =>
        rows.map((row) => ({
          consumerGroup: row.consumer_group,
          subscriptionFrom: row.subscription_from,
          partitionId: row.partition_id,
          partition: row.partition,
          committedOffset: Number(row.committed_offset),
          lag: Number(row.lag),
          leased: row.leased,
          leaseExpiresAt: row.lease_expires_at,
          retryCount: row.retry_count,
          deliveryAttempt: row.delivery_attempt,
        })),
    );
  }

  /** One lease more than `limit` tells whether there are more. */
  liveLeases(tenantId: string, queueId: string, limit: number): Statement<LeaseListDto> {
    // The clock's row is there even when no lease is: the answer's `now` costs no second round trip.
    return statement(
      sql`WITH clock AS (SELECT clock_timestamp() AS now)
       SELECT ${raw(isoTimestamp('k.now'))} AS now, l.consumer_group, l.partition_id, l.partition, l.lease_hint, l.epoch,
              l.messages, l.delivery_attempt, ${raw(isoTimestamp('l.lease_expires_at'))} AS expires_at,
              floor(extract(epoch FROM l.lease_expires_at - k.now) * 1000)::int AS remaining_ms,
              ${raw(isoTimestamp('l.lease_deadline'))} AS deadline, l.renewals,
              ${raw(isoTimestamp('l.lease_renewed_at'))} AS last_renewed_at, l.last_renewal_slack_ms
         FROM clock k
         LEFT JOIN LATERAL (
              SELECT c.consumer_group, c.partition_id, p.name AS partition,
                     right(c.lease_id::text, ${raw(String(LEASE_HINT_CHARS))}) AS lease_hint, c.lease_epoch AS epoch,
                     c.lease_end_offset - c.committed_offset AS messages, c.delivery_attempt, c.lease_expires_at,
                     c.lease_deadline, c.lease_renewals AS renewals, c.lease_renewed_at,
                     c.lease_renewal_slack_ms AS last_renewal_slack_ms
                FROM consumers c
                JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
               WHERE c.tenant_id = ${tenantId} AND c.queue_id = ${queueId} AND c.lease_id IS NOT NULL AND c.lease_expires_at > k.now
               ORDER BY c.lease_expires_at, c.partition_id, c.consumer_group
               LIMIT ${limit + 1}) l ON true
        ORDER BY l.lease_expires_at, l.partition_id, l.consumer_group`,
      (rows: LeaseRow[]) => {
        const now = rows[0].now;
        const live = rows.filter((row) => row.consumer_group !== null);
        return {
          now,
          leases: live.slice(0, limit).map((row) => ({
            consumerGroup: row.consumer_group!,
            partitionId: row.partition_id,
            partition: row.partition,
            leaseIdHint: `…${row.lease_hint}`,
            epoch: Number(row.epoch),
            messages: Number(row.messages),
            deliveryAttempt: row.delivery_attempt,
            expiresAt: row.expires_at,
            remainingMs: row.remaining_ms,
            deadline: row.deadline,
            renewals: row.renewals,
            lastRenewedAt: row.last_renewed_at,
            lastRenewalSlackMs: row.last_renewal_slack_ms,
          })),
          truncated: live.length > limit,
        };
      },
    );
  }
}

interface LeaseRow {
  now: string;
  consumer_group: string | null;
  partition_id: string;
  partition: string;
  lease_hint: string;
  epoch: string;
  messages: string;
  delivery_attempt: number;
  expires_at: string;
  remaining_ms: number;
  deadline: string | null;
  renewals: number;
  last_renewed_at: string | null;
  last_renewal_slack_ms: number | null;
}

function toQueue(row: QueueRow): QueueRecord {
  return {
    id: row.id,
    name: row.name,
    options: storedOptionsOf(row),
    namespace: row.namespace,
    task: row.task,
    retention: storedRetentionOf(row),
    extraOptions: row.options,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
