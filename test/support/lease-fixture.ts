import { DataSource } from 'typeorm';
import { uuidv7 } from '../../src/common/uuid';
import { sql } from './db-state';

export interface FixtureLease {
  leaseId: string;
  partitionIds: string[];
}

/**
 * Writes the consumer rows a pop would leave behind, so the lease route can be
 * exercised on its own: one queue, `expiresInSeconds.length` partitions, each
 * leased by one id with its own expiry (seconds from the database's now()).
 */
export async function createLease(
  dataSource: DataSource,
  tenantId: string,
  expiresInSeconds: number[],
  consumerGroup = '__QUEUE_MODE__',
): Promise<FixtureLease> {
  const queueId = uuidv7();
  const leaseId = uuidv7();
  await sql(dataSource, 'INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, $3)', [
    tenantId,
    queueId,
    `fixture-${queueId}`,
  ]);
  const partitionIds: string[] = [];
  for (const [index, seconds] of expiresInSeconds.entries()) {
    const partitionId = uuidv7();
    partitionIds.push(partitionId);
    await sql(dataSource, 'INSERT INTO partitions (tenant_id, id, queue_id, name) VALUES ($1, $2, $3, $4)', [
      tenantId,
      partitionId,
      queueId,
      `p${index}`,
    ]);
    await sql(dataSource,
      `INSERT INTO consumers (tenant_id, partition_id, consumer_group, lease_id, lease_end_offset, lease_expires_at)
       VALUES ($1, $2, $3, $4, 1, now() + make_interval(secs => $5))`,
      [tenantId, partitionId, consumerGroup, leaseId, seconds],
    );
  }
  return { leaseId, partitionIds };
}

/** Seconds from the database's now() to each row's expiry, in partition order (null when released). */
export async function secondsLeft(dataSource: DataSource, tenantId: string, partitionIds: string[]): Promise<number[]> {
  const rows: Array<{ left: string | null }> = await sql(dataSource,
    `SELECT extract(epoch FROM lease_expires_at - now()) AS left
       FROM consumers
      WHERE tenant_id = $1 AND partition_id = ANY($2::uuid[])
      ORDER BY array_position($2::uuid[], partition_id)`,
    [tenantId, partitionIds],
  );
  return rows.map((row) => Number(row.left));
}

/** Each row's expiry rendered by PostgreSQL in the contract's format, in partition order. */
export async function expiries(dataSource: DataSource, tenantId: string, partitionIds: string[]): Promise<string[]> {
  const rows: Array<{ expires_at: string }> = await sql(dataSource,
    `SELECT to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS expires_at
       FROM consumers
      WHERE tenant_id = $1 AND partition_id = ANY($2::uuid[])
      ORDER BY array_position($2::uuid[], partition_id)`,
    [tenantId, partitionIds],
  );
  return rows.map((row) => row.expires_at);
}

/** Seconds from the database's now() to an ISO timestamp from a response. */
export async function secondsUntil(dataSource: DataSource, isoTimestamp: string): Promise<number> {
  const [row] = await sql(dataSource, 'SELECT extract(epoch FROM $1::timestamptz - now()) AS left', [isoTimestamp]);
  return Number(row.left);
}

export async function expireLease(dataSource: DataSource, tenantId: string, leaseId: string): Promise<void> {
  await sql(dataSource,
    `UPDATE consumers SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND lease_id = $2`,
    [tenantId, leaseId],
  );
}

/** What an ack that completes the leased span, or a nack, does to the lease. */
export async function releaseLease(dataSource: DataSource, tenantId: string, leaseId: string): Promise<void> {
  await sql(dataSource,
    `UPDATE consumers SET lease_id = NULL, lease_expires_at = NULL, lease_end_offset = NULL
      WHERE tenant_id = $1 AND lease_id = $2`,
    [tenantId, leaseId],
  );
}
