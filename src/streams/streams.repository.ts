import { Injectable } from '@nestjs/common';
import {
  NO_SQL,
  nothing,
  prepared,
  raw,
  rows as rowsOf,
  shared,
  sql,
  Statement,
  statement,
} from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { UsageChange } from '../limits/stored-usage.repository';
import { isoTimestamp } from '../common/sql-timestamp';
import { uuidv7 } from '../common/uuid';
import { StateOp } from './cycle-request.pipe';

/** Advisory locks of cycles on one (query, partition): a flush and a cycle of the same state take turns. */
const STREAM_LOCK_SPACE = 73_460_022;

export interface StreamQuery {
  id: string;
  name: string;
  configHash: string;
}

export interface StreamQueryRow {
  query_id: string;
  name: string;
  source_queue: string;
  sink_queue: string | null;
  config_hash: string;
  created_at: string;
  updated_at: string;
}

export interface StateRow {
  key: string;
  value: unknown;
  updated_at: string;
}

export interface StateFilter {
  keys: string[];
  keyPrefix: string | undefined;
  ripeAtOrBefore: number | undefined;
}

/**
 * What deleted state counted, negative (freed): its bytes and entries, from the CTE `gone` of the deleted rows' bytes.
 * One row however many were deleted.
 */
const FREED_STATE = sql`-COALESCE((SELECT sum(bytes) FROM gone), 0) AS bytes,
              -(SELECT count(*) FROM gone)::int AS entries`;

interface FreedRow {
  bytes: string;
  entries: number;
}

const freedOf = (row: FreedRow): UsageChange => ({ bytes: Number(row.bytes), messages: row.entries });

/** What a cycle finds of its query and partition (StreamsRepository.cycleTarget). */
export interface CycleTarget {
  query: boolean;
  partition: boolean;
  sourceQueue: string | undefined;
}

/** Tenant-first like every table: a query id of another tenant is no query here. */
@Injectable()
export class StreamsRepository {
  /** The query by name, locked against a concurrent registration or reset; inserted when missing. */
  async registerByName(
    reader: StatementReader,
    tenantId: string,
    name: string,
    sourceQueueId: string,
    sinkQueue: string | null,
    configHash: string,
  ): Promise<{ query: StreamQuery; fresh: boolean }> {
    const tenant = shared(tenantId);
    const queryName = shared(name);
    const inserted = await reader.run(
      statement(
        sql`INSERT INTO stream_queries (tenant_id, id, name, source_queue_id, sink_queue, config_hash)
       VALUES (${tenant}, ${uuidv7()}, ${queryName}, ${sourceQueueId}, ${sinkQueue}, ${configHash})
       ON CONFLICT (tenant_id, name) DO NOTHING
       RETURNING id`,
        (rows: Array<{ id: string }>) => rows.at(0)?.id,
      ),
    );
    if (inserted !== undefined) return { query: { id: inserted, name, configHash }, fresh: true };
    const row = await reader.run(
      statement(
        sql`SELECT id, config_hash FROM stream_queries WHERE tenant_id = ${tenant} AND name = ${queryName} FOR UPDATE`,
        ([found]: Array<{ id: string; config_hash: string }>) => found,
      ),
    );
    return { query: { id: row.id, name, configHash: row.config_hash }, fresh: false };
  }

  /** Takes the registration's queues and hash; with `reset`, its state goes first. Answers what that freed. */
  async update(
    reader: StatementReader,
    tenantId: string,
    queryId: string,
    sourceQueueId: string,
    sinkQueue: string | null,
    configHash: string,
    reset: boolean,
  ): Promise<UsageChange> {
    const freed = reset ? await reader.run(this.deleteState(tenantId, queryId)) : { bytes: 0, messages: 0 };
    await reader.run(
      statement(
        sql`UPDATE stream_queries SET source_queue_id = ${sourceQueueId}, sink_queue = ${sinkQueue}, config_hash = ${configHash}, updated_at = now()
        WHERE tenant_id = ${tenantId} AND id = ${queryId}`,
        nothing,
      ),
    );
    return freed;
  }

  /** A query's whole state, and what it counted (negative: freed). */
  private deleteState(tenantId: string, queryId: string): Statement<UsageChange> {
    return statement(
      sql`WITH gone AS (DELETE FROM stream_state WHERE tenant_id = ${tenantId} AND query_id = ${queryId} RETURNING bytes)
       SELECT ${FREED_STATE}`,
      ([row]: FreedRow[]) => freedOf(row),
    );
  }

  /**
   * For a cycle: whether the query exists and the partition is one it may keep state for (a partition of its source
   * queue, or one it already keeps state for: retention removes a partition left empty, not its open windows). Key
   * share: a registration's reset or the queue's deletion waits for the cycle, and the cycle for them. The partition is
   * read by its id alone: asked with its queue too, a planner without fresh statistics walks the queue's partitions.
   */
  cycleTarget(tenantId: string, queryId: string, partitionId: string): Statement<CycleTarget> {
    const tenant = shared(tenantId);
    const partition = shared(partitionId);
    return prepared(
      'leasehold_cycle_target',
      sql`SELECT q.name AS source_queue,
            COALESCE((SELECT p.queue_id FROM partitions p WHERE p.tenant_id = ${tenant} AND p.id = ${partition}) = s.source_queue_id, false)
            OR EXISTS (SELECT 1 FROM stream_state t
                        WHERE t.tenant_id = ${tenant} AND t.query_id = s.id AND t.partition_id = ${partition}) AS partition_ok
       FROM stream_queries s
       JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.source_queue_id
      WHERE s.tenant_id = ${tenant} AND s.id = ${queryId}
        FOR KEY SHARE OF s`,
      ([found]: Array<{ source_queue: string; partition_ok: boolean }>) =>
        found === undefined
          ? { query: false, partition: false, sourceQueue: undefined }
          : { query: true, partition: found.partition_ok, sourceQueue: found.source_queue },
    );
  }

  /** One cycle at a time per query and partition: the second reads the state the first wrote. */
  cycleLock(tenantId: string, queryId: string, partitionId: string): Statement<void> {
    return prepared(
      'leasehold_cycle_lock',
      sql`SELECT pg_advisory_xact_lock(${raw(String(STREAM_LOCK_SPACE))}, hashtext(${tenantId} || ':' || ${queryId} || ':' || ${partitionId}))`,
      nothing,
    );
  }

  /**
   * In request order: a later operation on a key wins over an earlier one. One statement however many; it answers
   * what the tenant stores more (or less) for it: entries, and their keys' and values' bytes. Undefined for no
   * operation: nothing to send. Without the query it writes nothing rather than fail, so that it can be sent in the
   * round trip that finds the query out (the cycle then rolls back).
   */
  applyState(
    tenantId: string,
    queryId: string,
    partitionId: string,
    ops: StateOp[],
  ): Statement<UsageChange> | undefined {
    if (ops.length === 0) return undefined;
    const tenant = shared(tenantId);
    const query = shared(queryId);
    const partition = shared(partitionId);
    return prepared(
      'leasehold_cycle_state',
      sql`WITH ops AS (
         SELECT o.op ->> 'type' AS type, o.op ->> 'key' AS key, o.op -> 'value' AS value, o.n
           FROM jsonb_array_elements(${stateOpsJson(ops)}::jsonb) WITH ORDINALITY AS o(op, n)
       ), last AS (
         SELECT DISTINCT ON (key) type, key, value FROM ops ORDER BY key, n DESC
       ), old AS (
         SELECT s.key, s.bytes FROM stream_state s JOIN last l ON l.key = s.key
          WHERE s.tenant_id = ${tenant} AND s.query_id = ${query} AND s.partition_id = ${partition}
       ), deleted AS (
         DELETE FROM stream_state s USING last l
          WHERE s.tenant_id = ${tenant} AND s.query_id = ${query} AND s.partition_id = ${partition} AND s.key = l.key AND l.type = 'delete'
         RETURNING 1
       ), upserted AS (
         INSERT INTO stream_state (tenant_id, query_id, partition_id, key, value, bytes, updated_at)
         SELECT ${tenant}, ${query}, ${partition}, l.key, l.value, octet_length(l.key) + octet_length(l.value::text), clock_timestamp()
           FROM last l
          WHERE l.type = 'upsert'
            AND EXISTS (SELECT 1 FROM stream_queries q WHERE q.tenant_id = ${tenant} AND q.id = ${query})
          ORDER BY l.key
         ON CONFLICT (tenant_id, query_id, partition_id, key)
         DO UPDATE SET value = EXCLUDED.value, bytes = EXCLUDED.bytes, updated_at = EXCLUDED.updated_at
         RETURNING bytes
       )
       SELECT COALESCE((SELECT sum(bytes) FROM upserted), 0) - COALESCE((SELECT sum(bytes) FROM old), 0) AS bytes,
              (SELECT count(*) FROM upserted)::int - (SELECT count(*) FROM old)::int AS entries`,
      ([row]: FreedRow[]) => freedOf(row),
    );
  }

  /**
   * A partition's state, in key order; undefined when there is no such query. One round trip whether or not the query
   * keeps any (a row of nulls then), prepared once per filter shape: written with `$x IS NULL OR` switches, one
   * statement for every shape was planned at every call.
   */
  stateRead(
    tenantId: string,
    queryId: string,
    partitionId: string,
    { keys, keyPrefix, ripeAtOrBefore }: StateFilter,
    limit: number,
  ): Statement<StateRow[] | undefined> {
    const byKeys = keys.length > 0;
    const byPrefix = keyPrefix !== undefined;
    const ripe = ripeAtOrBefore !== undefined;
    return prepared(
      `leasehold_stream_state_${Number(byKeys)}${Number(byPrefix)}${Number(ripe)}`,
      sql`SELECT st.key, st.value, st.updated_at
         FROM stream_queries q
         LEFT JOIN LATERAL (
              SELECT s.key, s.value, ${raw(isoTimestamp('s.updated_at'))} AS updated_at
                FROM stream_state s
               WHERE s.tenant_id = q.tenant_id AND s.query_id = q.id AND s.partition_id = ${partitionId}
                     ${byKeys ? sql`AND s.key = ANY (${keys}::text[])` : NO_SQL}
                     ${byPrefix ? sql`AND starts_with(s.key, ${keyPrefix}::text)` : NO_SQL}
                     ${
                       ripe
                         ? sql`AND jsonb_typeof(s.value -> 'windowEnd') = 'number'
                               AND (s.value ->> 'windowEnd')::numeric <= ${ripeAtOrBefore}::numeric`
                         : NO_SQL
                     }
               ORDER BY s.key
               LIMIT ${limit}) st ON true
        WHERE q.tenant_id = ${tenantId} AND q.id = ${queryId}
        ORDER BY st.key`,
      (found: Array<{ key: string | null; value: unknown; updated_at: string }>) =>
        found.length === 0
          ? undefined
          : found.flatMap(({ key, value, updated_at }): StateRow[] =>
              key === null ? [] : [{ key, value, updated_at }],
            ),
    );
  }

  list(tenantId: string): Statement<StreamQueryRow[]> {
    return statement(
      sql`SELECT s.id AS query_id, s.name, q.name AS source_queue, s.sink_queue, s.config_hash,
              ${raw(isoTimestamp('s.created_at'))} AS created_at, ${raw(isoTimestamp('s.updated_at'))} AS updated_at
         FROM stream_queries s
         JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.source_queue_id
        WHERE s.tenant_id = ${tenantId}
        ORDER BY s.name
        LIMIT 1000`,
      rowsOf<StreamQueryRow>,
    );
  }

  /** The query and its state (cascade); undefined when there was none, else what its state counted (negative: freed). */
  delete(tenantId: string, name: string): Statement<UsageChange | undefined> {
    const tenant = shared(tenantId);
    return statement(
      sql`WITH d AS (DELETE FROM stream_queries WHERE tenant_id = ${tenant} AND name = ${name} RETURNING id),
            gone AS (DELETE FROM stream_state s USING d WHERE s.tenant_id = ${tenant} AND s.query_id = d.id RETURNING s.bytes)
       SELECT (SELECT count(*) FROM d)::int AS deleted, ${FREED_STATE}`,
      ([row]: Array<FreedRow & { deleted: number }>) => (row.deleted > 0 ? freedOf(row) : undefined),
    );
  }
}

function stateOpsJson(ops: StateOp[]): string {
  return `[${ops
    .map(
      (op) => `{"type":${JSON.stringify(op.type)},"key":${JSON.stringify(op.key)},"value":${op.valueJson ?? 'null'}}`,
    )
    .join(',')}]`;
}
