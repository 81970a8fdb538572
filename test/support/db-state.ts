import { Database } from '../../src/database/database';
import { waitFor } from './wait';

/**
 * Runs one of the tests' own statements in a transaction of its own. The
 * embedded database's socket server keeps a connection's protocol messages
 * together only inside a transaction: a bare statement with parameters can be
 * interleaved with another connection's, then run that one's statement or get
 * its rows. The broker guards its own statements (DatabaseEngine); this
 * guards the tests', which share the database with other files' brokers.
 */
export function sql<T = any>(dataSource: Database, text: string, parameters?: unknown[]): Promise<T> {
  return dataSource.transaction((session) => session.query(text, parameters)) as Promise<T>;
}

export interface CursorRow {
  partition: string;
  consumerGroup: string;
  committedOffset: number;
  deliveredOffset: number;
  leaseId: string | null;
  leaseEndOffset: number | null;
  leaseLive: boolean;
  hasExpiry: boolean;
  retryCount: number;
  deliveryAttempt: number;
}

/** Every consumer row of a queue, straight from the table, ordered by group and partition name. */
export async function cursors(dataSource: Database, tenantId: string, queue: string): Promise<CursorRow[]> {
  const rows: Array<Record<string, unknown>> = await sql(
    dataSource,
    `SELECT p.name AS partition, c.consumer_group, c.committed_offset, c.delivered_offset, c.lease_id,
            c.lease_end_offset, COALESCE(c.lease_expires_at > now(), false) AS lease_live,
            c.lease_expires_at IS NOT NULL AS has_expiry, c.retry_count, c.delivery_attempt
       FROM consumers c
       JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
       JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE c.tenant_id = $1 AND q.name = $2
      ORDER BY c.consumer_group, p.name`,
    [tenantId, queue],
  );
  return rows.map((row) => ({
    partition: row.partition as string,
    consumerGroup: row.consumer_group as string,
    committedOffset: Number(row.committed_offset),
    deliveredOffset: Number(row.delivered_offset),
    leaseId: row.lease_id as string | null,
    leaseEndOffset: row.lease_end_offset === null ? null : Number(row.lease_end_offset),
    leaseLive: row.lease_live as boolean,
    hasExpiry: row.has_expiry as boolean,
    retryCount: row.retry_count as number,
    deliveryAttempt: row.delivery_attempt as number,
  }));
}

/** Counts of what a tenant has stored, to prove a refused request changed nothing. */
export async function storedCounts(dataSource: Database, tenantId: string): Promise<Record<string, number>> {
  const [row] = await sql(
    dataSource,
    `SELECT (SELECT count(*)::int FROM queues WHERE tenant_id = $1) AS queues,
            (SELECT count(*)::int FROM partitions WHERE tenant_id = $1) AS partitions,
            (SELECT count(*)::int FROM messages WHERE tenant_id = $1) AS messages,
            (SELECT count(*)::int FROM consumer_groups WHERE tenant_id = $1) AS consumer_groups,
            (SELECT count(*)::int FROM consumers WHERE tenant_id = $1) AS consumers,
            (SELECT count(*)::int FROM dead_letters WHERE tenant_id = $1) AS dead_letters`,
    [tenantId],
  );
  return row;
}

/** Makes the tenant's messages (and dead letters) look pushed `seconds` earlier, keeping their order. */
export async function ageMessages(dataSource: Database, tenantId: string, seconds: number): Promise<void> {
  await sql(
    dataSource,
    `UPDATE messages SET created_at = created_at - make_interval(secs => $2) WHERE tenant_id = $1`,
    [tenantId, seconds],
  );
  await sql(
    dataSource,
    `UPDATE dead_letters SET created_at = created_at - make_interval(secs => $2) WHERE tenant_id = $1`,
    [tenantId, seconds],
  );
}

/** Ends a lease (every row it holds) by the database clock, as if its time had run out. */
export async function expireLeases(dataSource: Database, tenantId: string, leaseId: string): Promise<void> {
  await sql(
    dataSource,
    `UPDATE consumers SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND lease_id = $2`,
    [tenantId, leaseId],
  );
}

/** Seconds from the database's now() to the expiry of each row held by a lease. */
export async function leaseSecondsLeft(dataSource: Database, tenantId: string, leaseId: string): Promise<number[]> {
  const rows: Array<{ left: string }> = await sql(
    dataSource,
    `SELECT extract(epoch FROM lease_expires_at - now()) AS left FROM consumers WHERE tenant_id = $1 AND lease_id = $2`,
    [tenantId, leaseId],
  );
  return rows.map((row) => Number(row.left));
}

const TENANT_TABLES = [
  'queues',
  'partitions',
  'messages',
  'consumer_groups',
  'consumers',
  'dead_letters',
  'tenant_usage',
  'traces',
  'trace_names',
  'trace_name_messages',
  'trace_name_totals',
];

/**
 * Every row the tenant owns in every broker table, every column, as
 * PostgreSQL renders it (so timestamps keep their microseconds). Equal
 * snapshots mean a request changed nothing at all.
 */
export async function tenantSnapshot(dataSource: Database, tenantId: string): Promise<Record<string, string[]>> {
  const snapshot: Record<string, string[]> = {};
  for (const table of TENANT_TABLES) {
    const rows: Array<{ row: string }> = await sql(
      dataSource,
      // When the retention job next looks at a partition is its bookkeeping, not the tenant's data.
      `SELECT (to_jsonb(t) - 'retention_check_at')::text AS row FROM ${table} AS t WHERE tenant_id = $1 ORDER BY 1`,
      [tenantId],
    );
    snapshot[table] = rows.map((entry) => entry.row);
  }
  return snapshot;
}

/** Waits until every lease row held by the lease has run out by the database's clock. */
export async function waitUntilExpired(dataSource: Database, tenantId: string, leaseId: string): Promise<void> {
  await waitFor(
    async () => (await leaseSecondsLeft(dataSource, tenantId, leaseId)).every((left) => left <= 0),
    `lease ${leaseId} running out`,
    30_000,
  );
}
