import { Injectable } from '@nestjs/common';
import { raw, shared, Sql, sql, Statement, statement } from '../database/statement';
import { isoTimestamp } from '../common/sql-timestamp';
import { PayloadCipher, UnreadablePayloadError } from '../encryption/payload-cipher';
import { StoredTrace } from './trace-shape';

export interface NewTrace {
  id: string;
  partitionId: string;
  transactionId: string;
  eventType: string;
  dataJson: string;
  consumerGroup: string;
  workerId: string;
  traceNames: string[];
}

export type Recorded = 'recorded' | 'message not found' | 'message full';

export interface TracePageRequest {
  limit: number;
  offset: number;
  after: { createdAt: string; id: string } | undefined;
}

export interface TraceName {
  name: string;
  traceCount: number;
  messageCount: number;
  lastSeen: string;
}

/** What a trace adds to an answer besides its data, names and payload: keys, ids, timestamps. */
const TRACE_ENVELOPE_BYTES = 400;

interface TraceRow {
  id: string;
  transaction_id: string;
  partition_id: string;
  event_type: string;
  data: string;
  consumer_group: string;
  worker_id: string;
  created_at: string;
  queue_name: string;
  partition_name: string;
  payload?: string;
  /** The key the payload was encrypted under; null when stored plain. */
  key_id?: string | null;
  trace_names: string[];
}

function storedTrace(row: TraceRow): StoredTrace {
  return {
    id: row.id,
    transactionId: row.transaction_id,
    partitionId: row.partition_id,
    eventType: row.event_type,
    dataJson: row.data,
    consumerGroup: row.consumer_group,
    workerId: row.worker_id,
    createdAt: row.created_at,
    queueName: row.queue_name,
    partitionName: row.partition_name,
    payloadJson: row.payload,
    traceNames: row.trace_names,
  };
}

/**
 * One statement: the message is looked up, the trace and its names stored and the names' totals counted, or nothing.
 * Totals are taken in name order, as every trace takes them.
 */
function recordSql(tenantId: string, trace: NewTrace, perMessage: number): Sql {
  const tenant = shared(tenantId);
  const limit = shared(perMessage);
  const names = shared(trace.traceNames);
  return sql`
  WITH message AS (
    SELECT m.tenant_id, m.partition_id, m.seq FROM messages m
     WHERE m.tenant_id = ${tenant} AND m.partition_id = ${trace.partitionId} AND m.transaction_id = ${trace.transactionId}
  ), kept AS (
    SELECT count(*) AS traces FROM (
      SELECT 1 FROM traces t JOIN message m ON t.tenant_id = m.tenant_id AND t.partition_id = m.partition_id
                                            AND t.message_seq = m.seq
       LIMIT ${limit}) x
  ), trace AS (
    INSERT INTO traces (tenant_id, id, partition_id, message_seq, event_type, data, consumer_group, worker_id, trace_names)
    SELECT m.tenant_id, ${trace.id}, m.partition_id, m.seq, ${trace.eventType}, ${trace.dataJson}::json, ${trace.consumerGroup}, ${trace.workerId}, ${names}::text[]
      FROM message m, kept k WHERE k.traces < ${limit}
    RETURNING tenant_id, id, partition_id, message_seq, created_at
  ), labels AS (
    SELECT DISTINCT unnest(${names}::text[]) AS name
  ), named AS (
    INSERT INTO trace_names (tenant_id, name, created_at, trace_id)
    SELECT t.tenant_id, l.name, t.created_at, t.id FROM trace t, labels l
  ), per_message AS (
    INSERT INTO trace_name_messages AS x (tenant_id, name, partition_id, message_seq, traces, last_seen)
    SELECT t.tenant_id, l.name, t.partition_id, t.message_seq, 1, t.created_at FROM trace t, labels l
     ORDER BY l.name
    ON CONFLICT (tenant_id, name, partition_id, message_seq) DO UPDATE
       SET traces = x.traces + 1, last_seen = GREATEST(x.last_seen, excluded.last_seen)
    RETURNING x.tenant_id, x.name, x.traces = 1 AS first, x.last_seen
  ), totals AS (
    INSERT INTO trace_name_totals AS s (tenant_id, name, trace_count, message_count, last_seen)
    SELECT tenant_id, name, 1, CASE WHEN first THEN 1 ELSE 0 END, last_seen FROM per_message
     ORDER BY name
    ON CONFLICT (tenant_id, name) DO UPDATE
       SET trace_count = s.trace_count + 1, message_count = s.message_count + excluded.message_count,
           last_seen = GREATEST(s.last_seen, excluded.last_seen)
  )
  SELECT (SELECT count(*)::int FROM message) AS found, (SELECT count(*)::int FROM trace) AS recorded`;
}

@Injectable()
export class TracesRepository {
  constructor(private readonly cipher: PayloadCipher) {}

  record(tenantId: string, trace: NewTrace, perMessage: number): Statement<Recorded> {
    return statement(recordSql(tenantId, trace, perMessage), ([row]: Array<{ found: number; recorded: number }>) => {
      if (row.found === 0) return 'message not found';
      return row.recorded === 0 ? 'message full' : 'recorded';
    });
  }

  /** Oldest first; at most TRACES_PER_MESSAGE_MAX of them exist. The payload is not read: the answer omits it. */
  ofMessage(tenantId: string, partitionId: string, transactionId: string): Statement<StoredTrace[]> {
    return statement(
      sql`SELECT t.id, m.transaction_id, t.partition_id, t.event_type, t.data::text AS data, t.consumer_group,
              t.worker_id, ${raw(isoTimestamp('t.created_at'))} AS created_at, t.trace_names, q.name AS queue_name,
              p.name AS partition_name
         FROM messages m
         JOIN traces t ON t.tenant_id = m.tenant_id AND t.partition_id = m.partition_id AND t.message_seq = m.seq
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE m.tenant_id = ${tenantId} AND m.partition_id = ${partitionId} AND m.transaction_id = ${transactionId}
        ORDER BY t.created_at, t.id`,
      (rows: TraceRow[]) => rows.map(storedTrace),
    );
  }

  /**
   * Newest first from the name's index, walking only that name's rows; cut short before `maxBytes` (the first one
   * always comes). `more` when traces are left after the page.
   */
  byName(
    tenantId: string,
    name: string,
    page: TracePageRequest,
    maxBytes: number,
  ): Statement<{ traces: StoredTrace[]; more: boolean }> {
    const tenant = shared(tenantId);
    const limit = shared(page.limit);
    const after = shared(page.after?.createdAt ?? null);
    return statement(
      sql`WITH page AS (
         SELECT n.created_at, n.trace_id FROM trace_names n
          WHERE n.tenant_id = ${tenant} AND n.name = ${name}
            AND (${after}::timestamptz IS NULL OR (n.created_at, n.trace_id) < (${after}::timestamptz, ${page.after?.id ?? null}::uuid))
          ORDER BY n.created_at DESC, n.trace_id DESC
          LIMIT ${limit} + 1 OFFSET ${page.offset}
       ), measured AS (
         SELECT x.*, count(*) OVER () AS page_rows,
                sum(x.bytes) OVER (ORDER BY x.created_at DESC, x.trace_id DESC) AS answer_bytes,
                row_number() OVER (ORDER BY x.created_at DESC, x.trace_id DESC) AS position
           FROM (SELECT g.created_at, g.trace_id, t.partition_id, t.message_seq,
                        octet_length(t.data::text) + octet_length(array_to_string(t.trace_names, ',')) * 2
                          + COALESCE(m.payload_bytes, octet_length(m.payload::text), 4) + octet_length(m.transaction_id)
                          + octet_length(t.event_type) + octet_length(t.consumer_group) + octet_length(t.worker_id)
                          + octet_length(q.name) + octet_length(p.name) + ${raw(String(TRACE_ENVELOPE_BYTES))} AS bytes
                   FROM page g
                   JOIN traces t ON t.tenant_id = ${tenant} AND t.id = g.trace_id
                   JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = t.partition_id AND m.seq = t.message_seq
                   JOIN partitions p ON p.tenant_id = ${tenant} AND p.id = t.partition_id
                   JOIN queues q ON q.tenant_id = ${tenant} AND q.id = p.queue_id) x
       )
       SELECT t.id, m.transaction_id, t.partition_id, t.event_type, t.data::text AS data, t.consumer_group, t.worker_id,
              ${raw(isoTimestamp('t.created_at'))} AS created_at, t.trace_names, q.name AS queue_name,
              p.name AS partition_name, COALESCE(m.payload::text, 'null') AS payload, m.key_id, z.page_rows
         FROM measured z
         JOIN traces t ON t.tenant_id = ${tenant} AND t.id = z.trace_id
         JOIN messages m ON m.tenant_id = ${tenant} AND m.partition_id = z.partition_id AND m.seq = z.message_seq
         JOIN partitions p ON p.tenant_id = ${tenant} AND p.id = z.partition_id
         JOIN queues q ON q.tenant_id = ${tenant} AND q.id = p.queue_id
        WHERE z.position <= ${limit} AND (z.answer_bytes <= ${maxBytes} OR z.position = 1)
        ORDER BY z.created_at DESC, z.trace_id DESC`,
      (rows: Array<TraceRow & { page_rows: string }>) => {
        const pageRows = rows.length > 0 ? Number(rows[0].page_rows) : 0;
        return { traces: rows.map((row) => storedTrace(this.opened(row))), more: rows.length < pageRows };
      },
    );
  }

  /** An encrypted queue's payload answered as sent; one that does not decrypt as null, as the message routes do. */
  private opened(row: TraceRow): TraceRow {
    if (row.key_id === null || row.key_id === undefined || row.payload === undefined) return row;
    try {
      return { ...row, payload: this.cipher.open(row.key_id, row.payload) };
    } catch (error) {
      if (!(error instanceof UnreadablePayloadError)) throw error;
      return { ...row, payload: 'null' };
    }
  }

  nameTotal(tenantId: string, name: string): Statement<number> {
    return statement(
      sql`SELECT trace_count FROM trace_name_totals WHERE tenant_id = ${tenantId} AND name = ${name}`,
      (rows: Array<{ trace_count: string }>) => (rows.length > 0 ? Number(rows[0].trace_count) : 0),
    );
  }

  /** Most recently seen first, from the totals: one row per name, never the traces. */
  names(tenantId: string, limit: number, offset: number): Statement<TraceName[]> {
    return statement(
      sql`SELECT name, trace_count, message_count, ${raw(isoTimestamp('last_seen'))} AS last_seen
           FROM trace_name_totals
          WHERE tenant_id = ${tenantId}
          ORDER BY last_seen DESC, name DESC
          LIMIT ${limit} OFFSET ${offset}`,
      (rows: Array<{ name: string; trace_count: string; message_count: string; last_seen: string }>) =>
        rows.map((row) => ({
          name: row.name,
          traceCount: Number(row.trace_count),
          messageCount: Number(row.message_count),
          lastSeen: row.last_seen,
        })),
    );
  }

  nameCount(tenantId: string): Statement<number> {
    return statement(
      sql`SELECT count(*)::int AS total FROM trace_name_totals WHERE tenant_id = ${tenantId}`,
      ([row]: Array<{ total: number }>) => row.total,
    );
  }
}
