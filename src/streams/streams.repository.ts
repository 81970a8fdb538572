import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
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

/** Tenant-first like every table: a query id of another tenant is no query here. */
@Injectable()
export class StreamsRepository {
  /** The query by name, locked against a concurrent registration or reset; inserted when missing. */
  async registerByName(
    tenantId: string,
    name: string,
    sourceQueueId: string,
    sinkQueue: string | null,
    configHash: string,
    manager: EntityManager,
  ): Promise<{ query: StreamQuery; fresh: boolean }> {
    const inserted: Array<{ id: string }> = await manager.query(
      `INSERT INTO stream_queries (tenant_id, id, name, source_queue_id, sink_queue, config_hash)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (tenant_id, name) DO NOTHING
       RETURNING id`,
      [tenantId, uuidv7(), name, sourceQueueId, sinkQueue, configHash],
    );
    if (inserted.length > 0) return { query: { id: inserted[0].id, name, configHash }, fresh: true };
    const [row]: Array<{ id: string; config_hash: string }> = await manager.query(
      'SELECT id, config_hash FROM stream_queries WHERE tenant_id = $1 AND name = $2 FOR UPDATE',
      [tenantId, name],
    );
    return { query: { id: row.id, name, configHash: row.config_hash }, fresh: false };
  }

  /** Takes the registration's queues and hash; with `reset`, its state goes first. Answers what that freed. */
  async update(
    tenantId: string,
    queryId: string,
    sourceQueueId: string,
    sinkQueue: string | null,
    configHash: string,
    reset: boolean,
    manager: EntityManager,
  ): Promise<UsageChange> {
    const freed = reset ? await this.deleteState(tenantId, queryId, manager) : { bytes: 0, messages: 0 };
    await manager.query(
      `UPDATE stream_queries SET source_queue_id = $3, sink_queue = $4, config_hash = $5, updated_at = now()
        WHERE tenant_id = $1 AND id = $2`,
      [tenantId, queryId, sourceQueueId, sinkQueue, configHash],
    );
    return freed;
  }

  /** A query's whole state, and what it counted (negative: freed). */
  private async deleteState(tenantId: string, queryId: string, manager: EntityManager): Promise<UsageChange> {
    const [row]: Array<{ bytes: string; entries: number }> = await manager.query(
      `WITH gone AS (DELETE FROM stream_state WHERE tenant_id = $1 AND query_id = $2 RETURNING bytes)
       SELECT -COALESCE(sum(bytes), 0) AS bytes, -count(*)::int AS entries FROM gone`,
      [tenantId, queryId],
    );
    return { bytes: Number(row.bytes), messages: row.entries };
  }

  /**
   * For a cycle: whether the query exists and the partition is one it may keep state for (a partition of its source
   * queue, or one it already keeps state for: retention removes a partition left empty, not its open windows). Key
   * share: a registration's reset or the queue's deletion waits for the cycle, and the cycle for them.
   */
  async lockForCycle(
    tenantId: string,
    queryId: string,
    partitionId: string,
    manager: EntityManager,
  ): Promise<{ query: boolean; partition: boolean; sourceQueue: string | undefined }> {
    const rows: Array<{ source_queue: string; partition_ok: boolean }> = await manager.query(
      `SELECT q.name AS source_queue,
              EXISTS (SELECT 1 FROM partitions p
                       WHERE p.tenant_id = $1 AND p.id = $3 AND p.queue_id = s.source_queue_id)
              OR EXISTS (SELECT 1 FROM stream_state t
                          WHERE t.tenant_id = $1 AND t.query_id = s.id AND t.partition_id = $3) AS partition_ok
         FROM stream_queries s
         JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.source_queue_id
        WHERE s.tenant_id = $1 AND s.id = $2
          FOR KEY SHARE OF s`,
      [tenantId, queryId, partitionId],
    );
    if (rows.length === 0) return { query: false, partition: false, sourceQueue: undefined };
    await manager.query(`SELECT pg_advisory_xact_lock(${STREAM_LOCK_SPACE}, hashtext($1 || ':' || $2 || ':' || $3))`, [
      tenantId,
      queryId,
      partitionId,
    ]);
    return { query: true, partition: rows[0].partition_ok, sourceQueue: rows[0].source_queue };
  }

  /**
   * In request order: a later operation on a key wins over an earlier one. One statement however many; it answers
   * what the tenant stores more (or less) for it: entries, and their keys' and values' bytes.
   */
  async applyState(
    tenantId: string,
    queryId: string,
    partitionId: string,
    ops: StateOp[],
    manager: EntityManager,
  ): Promise<UsageChange> {
    if (ops.length === 0) return { bytes: 0, messages: 0 };
    const [row]: Array<{ bytes: string; entries: number }> = await manager.query(
      `WITH ops AS (
         SELECT o.op ->> 'type' AS type, o.op ->> 'key' AS key, o.op -> 'value' AS value, o.n
           FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY AS o(op, n)
       ), last AS (
         SELECT DISTINCT ON (key) type, key, value FROM ops ORDER BY key, n DESC
       ), old AS (
         SELECT s.key, s.bytes FROM stream_state s JOIN last l ON l.key = s.key
          WHERE s.tenant_id = $1 AND s.query_id = $2 AND s.partition_id = $3
       ), deleted AS (
         DELETE FROM stream_state s USING last l
          WHERE s.tenant_id = $1 AND s.query_id = $2 AND s.partition_id = $3 AND s.key = l.key AND l.type = 'delete'
         RETURNING 1
       ), upserted AS (
         INSERT INTO stream_state (tenant_id, query_id, partition_id, key, value, bytes, updated_at)
         SELECT $1, $2, $3, l.key, l.value, octet_length(l.key) + octet_length(l.value::text), clock_timestamp()
           FROM last l WHERE l.type = 'upsert' ORDER BY l.key
         ON CONFLICT (tenant_id, query_id, partition_id, key)
         DO UPDATE SET value = EXCLUDED.value, bytes = EXCLUDED.bytes, updated_at = EXCLUDED.updated_at
         RETURNING bytes
       )
       SELECT COALESCE((SELECT sum(bytes) FROM upserted), 0) - COALESCE((SELECT sum(bytes) FROM old), 0) AS bytes,
              (SELECT count(*) FROM upserted)::int - (SELECT count(*) FROM old)::int AS entries`,
      [tenantId, queryId, partitionId, stateOpsJson(ops)],
    );
    return { bytes: Number(row.bytes), messages: row.entries };
  }

  async state(
    tenantId: string,
    queryId: string,
    partitionId: string,
    filter: StateFilter,
    limit: number,
    manager: EntityManager,
  ): Promise<StateRow[] | undefined> {
    const rows: Array<StateRow & { known: boolean }> = await manager.query(
      `SELECT s.key, s.value, ${isoTimestamp('s.updated_at')} AS updated_at, true AS known
         FROM stream_queries q
         JOIN stream_state s ON s.tenant_id = q.tenant_id AND s.query_id = q.id AND s.partition_id = $3
        WHERE q.tenant_id = $1 AND q.id = $2
          AND (cardinality($4::text[]) = 0 OR s.key = ANY ($4::text[]))
          AND ($5::text IS NULL OR starts_with(s.key, $5::text))
          AND ($6::numeric IS NULL
               OR (jsonb_typeof(s.value -> 'windowEnd') = 'number' AND (s.value ->> 'windowEnd')::numeric <= $6::numeric))
        ORDER BY s.key
        LIMIT $7`,
      [tenantId, queryId, partitionId, filter.keys, filter.keyPrefix ?? null, filter.ripeAtOrBefore ?? null, limit],
    );
    if (rows.length > 0) return rows.map(({ key, value, updated_at }) => ({ key, value, updated_at }));
    const [query]: Array<{ id: string }> = await manager.query(
      'SELECT id FROM stream_queries WHERE tenant_id = $1 AND id = $2',
      [tenantId, queryId],
    );
    return query ? [] : undefined;
  }

  async list(tenantId: string, manager: EntityManager): Promise<StreamQueryRow[]> {
    return manager.query(
      `SELECT s.id AS query_id, s.name, q.name AS source_queue, s.sink_queue, s.config_hash,
              ${isoTimestamp('s.created_at')} AS created_at, ${isoTimestamp('s.updated_at')} AS updated_at
         FROM stream_queries s
         JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.source_queue_id
        WHERE s.tenant_id = $1
        ORDER BY s.name
        LIMIT 1000`,
      [tenantId],
    );
  }

  /** Its state goes with it (cascade). False when there was none by that name. */
  /** The query and its state; undefined when there was none, else what its state counted (negative: freed). */
  async delete(tenantId: string, name: string, manager: EntityManager): Promise<UsageChange | undefined> {
    const [row]: Array<{ deleted: number; bytes: string; entries: number }> = await manager.query(
      `WITH d AS (DELETE FROM stream_queries WHERE tenant_id = $1 AND name = $2 RETURNING id),
            gone AS (DELETE FROM stream_state s USING d WHERE s.tenant_id = $1 AND s.query_id = d.id RETURNING s.bytes)
       SELECT (SELECT count(*) FROM d)::int AS deleted, -COALESCE((SELECT sum(bytes) FROM gone), 0) AS bytes,
              -(SELECT count(*) FROM gone)::int AS entries`,
      [tenantId, name],
    );
    return row.deleted > 0 ? { bytes: Number(row.bytes), messages: row.entries } : undefined;
  }
}

function stateOpsJson(ops: StateOp[]): string {
  return `[${ops
    .map(
      (op) => `{"type":${JSON.stringify(op.type)},"key":${JSON.stringify(op.key)},"value":${op.valueJson ?? 'null'}}`,
    )
    .join(',')}]`;
}
