import { INestApplication } from '@nestjs/common';
import { Database } from '../../src/database/database';
import { uuidv7 } from '../../src/common/uuid';
import { AckService } from '../../src/ack/ack.service';
import { PopService } from '../../src/pop/pop.service';
import { PushService } from '../../src/push/push.service';
import { PopBody } from './broker-client';
import { sql } from './db-state';

export interface FixtureLease {
  leaseId: string;
  queue: string;
  partitionIds: string[];
  consumerGroup: string;
  messages: Array<{ transactionId: string; partitionId: string }>;
}

/**
 * Mints a real lease the way a consumer does, through the broker's push and
 * pop (called as services, so suites with auth on need no token for setup):
 * one message in each of `expiresInSeconds.length` partitions, one pop that
 * claims them all under one lease id. Each row's expiry is then set to its
 * own distance from the database's now(), so tests can state exact
 * expectations about the earliest expiry and about never shortening.
 */
export async function createLease(
  app: INestApplication,
  tenantId: string,
  expiresInSeconds: number[],
  consumerGroup = '__QUEUE_MODE__',
): Promise<FixtureLease> {
  const queue = `lease-${uuidv7()}`;
  const partitions = expiresInSeconds.map((_seconds, index) => `p${index}`);
  await app.get(PushService).push(
    tenantId,
    undefined,
    partitions.map((partition, index) => ({
      queue,
      partition,
      payloadJson: JSON.stringify({ index }),
      transactionId: undefined,
      traceId: undefined,
    })),
  );
  const answer = await app.get(PopService).pop(
    tenantId,
    queue,
    undefined,
    {
      batch: partitions.length,
      partitions: partitions.length,
      wait: false,
      timeoutMs: 0,
      leaseSeconds: 60,
      consumerGroup,
      subscriptionMode: 'all',
      subscriptionFrom: undefined,
      autoAck: false,
    },
    new AbortController().signal,
  );
  const popped = answer && (JSON.parse(answer.text) as PopBody);
  if (!popped?.leaseId || popped.partitionsClaimed !== partitions.length) {
    throw new Error(`pop claimed ${popped?.partitionsClaimed ?? 0} of ${partitions.length} partitions`);
  }
  const dataSource = app.get(Database);
  const rows: Array<{ id: string }> = await sql(
    dataSource,
    `SELECT p.id FROM partitions AS p JOIN queues AS q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE p.tenant_id = $1 AND q.name = $2 ORDER BY p.name`,
    [tenantId, queue],
  );
  const partitionIds = rows.map((row) => row.id);
  for (const [index, seconds] of expiresInSeconds.entries()) {
    await sql(
      dataSource,
      `UPDATE consumers SET lease_expires_at = now() + make_interval(secs => $3)
        WHERE tenant_id = $1 AND partition_id = $2 AND lease_id = $4`,
      [tenantId, partitionIds[index], seconds, popped.leaseId],
    );
  }
  return {
    leaseId: popped.leaseId,
    queue,
    partitionIds,
    consumerGroup,
    messages: popped.messages.map(({ transactionId, partitionId }) => ({ transactionId, partitionId })),
  };
}

/** Ends a lease through the broker's own ack path: `completed` acks the whole span, `failed` is a nack. */
export async function releaseLease(
  app: INestApplication,
  tenantId: string,
  lease: FixtureLease,
  outcome: 'completed' | 'failed',
): Promise<void> {
  const results = await app.get(AckService).acknowledge(
    tenantId,
    lease.messages.map((message) => ({
      ...message,
      outcome,
      consumerGroup: lease.consumerGroup,
      leaseId: lease.leaseId,
      error: outcome === 'failed' ? 'released by the test' : null,
    })),
  );
  if (!results.some((result) => result.leaseReleased)) {
    throw new Error(`the ${outcome} ack released no lease: ${JSON.stringify(results)}`);
  }
}

/** Seconds from the database's now() to each row's expiry, in partition order (null when released). */
export async function secondsLeft(dataSource: Database, tenantId: string, partitionIds: string[]): Promise<number[]> {
  const rows: Array<{ left: string | null }> = await sql(
    dataSource,
    `SELECT extract(epoch FROM lease_expires_at - now()) AS left
       FROM consumers
      WHERE tenant_id = $1 AND partition_id = ANY($2::uuid[])
      ORDER BY array_position($2::uuid[], partition_id)`,
    [tenantId, partitionIds],
  );
  return rows.map((row) => Number(row.left));
}

/** Each row's expiry rendered by PostgreSQL in the contract's format, in partition order. */
export async function expiries(dataSource: Database, tenantId: string, partitionIds: string[]): Promise<string[]> {
  const rows: Array<{ expires_at: string }> = await sql(
    dataSource,
    `SELECT to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS expires_at
       FROM consumers
      WHERE tenant_id = $1 AND partition_id = ANY($2::uuid[])
      ORDER BY array_position($2::uuid[], partition_id)`,
    [tenantId, partitionIds],
  );
  return rows.map((row) => row.expires_at);
}

/** Seconds from the database's now() to an ISO timestamp from a response. */
export async function secondsUntil(dataSource: Database, isoTimestamp: string): Promise<number> {
  const [row] = await sql(dataSource, 'SELECT extract(epoch FROM $1::timestamptz - now()) AS left', [isoTimestamp]);
  return Number(row.left);
}
