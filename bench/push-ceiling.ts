import { Client, PoolClient } from 'pg';
import { uuidv7 } from '../src/common/uuid';
import { percentile } from './http';
import { postgresCpu, postgresCpuSince } from './usage';

/*
 * PostgreSQL's own ceiling for a push: `connections` node-postgres clients in
 * a loop, each writing batches of `items` rows of the push workload's shape
 * into the broker's tables, partition by partition as the push workload
 * spreads them, in the transaction a push runs: lock the partition, insert
 * the rows and move its last offset, commit. No HTTP, no validation, no
 * duplicate check: what is left when everything the broker adds is gone.
 */

export interface CeilingResult {
  messagesPerSecond: number;
  p50: number;
  p99: number;
  /** PostgreSQL's CPU seconds per 1,000 messages. */
  postgresCpu: number;
}

const INSERT_SQL = `
  WITH stored AS (
    INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, trace_id, payload, payload_bytes, created_at)
    SELECT $1, $2, t.seq, t.id, t.transaction_id, NULL, t.payload::json, octet_length(t.payload), clock_timestamp()
      FROM unnest($3::bigint[], $4::uuid[], $5::text[], $6::text[]) AS t(seq, id, transaction_id, payload)
  )
  UPDATE partitions SET last_offset = $7, last_pushed_at = now() WHERE tenant_id = $1 AND id = $2`;

export interface PartitionRow {
  tenant_id: string;
  id: string;
}

/** A push's transaction without the broker: lock the partition, insert the rows and move its last offset, commit. */
export async function storeRows(
  client: Client | PoolClient,
  partition: PartitionRow,
  texts: string[],
): Promise<{ ids: string[]; transactionIds: string[] }> {
  const ids = texts.map(() => uuidv7());
  const transactionIds = texts.map(() => uuidv7());
  await client.query('BEGIN');
  try {
    const {
      rows: [locked],
    } = await client.query<{ last_offset: string }>(
      'SELECT last_offset FROM partitions WHERE tenant_id = $1 AND id = $2 FOR UPDATE',
      [partition.tenant_id, partition.id],
    );
    const first = Number(locked.last_offset) + 1;
    await client.query(INSERT_SQL, [
      partition.tenant_id,
      partition.id,
      texts.map((_text, index) => first + index),
      ids,
      transactionIds,
      texts,
      first + texts.length - 1,
    ]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
  return { ids, transactionIds };
}

export async function measurePushCeiling(
  databaseUrl: string,
  queue: string,
  payload: (index: number) => unknown,
  options: { connections: number; items: number; seconds: number },
): Promise<CeilingResult> {
  const setup = new Client({ connectionString: databaseUrl });
  await setup.connect();
  const { rows: partitions } = await setup.query<PartitionRow>(
    `SELECT p.tenant_id, p.id FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE q.name = $1 ORDER BY p.name`,
    [queue],
  );
  await setup.end();
  if (partitions.length === 0) throw new Error(`queue ${queue} has no partitions: run the push workload first`);

  const texts = Array.from({ length: options.items }, (_unused, index) => JSON.stringify(payload(index)));
  const latencies: number[] = [];
  let messages = 0;
  let turn = 0;
  // Connected first and ended last, so that their backends' CPU is still there to read.
  const clients = await Promise.all(
    Array.from({ length: options.connections }, async () => {
      const client = new Client({ connectionString: databaseUrl });
      await client.connect();
      return client;
    }),
  );
  const cpuBefore = postgresCpu();
  const deadline = performance.now() + options.seconds * 1000;
  const started = performance.now();
  let postgresSeconds = 0;
  try {
    await Promise.all(
      clients.map(async (client) => {
        while (performance.now() < deadline) {
          const partition = partitions[turn++ % partitions.length];
          const began = performance.now();
          await storeRows(client, partition, texts);
          latencies.push(performance.now() - began);
          messages += texts.length;
        }
      }),
    );
    postgresSeconds = postgresCpuSince(cpuBefore);
  } finally {
    await Promise.all(clients.map((client) => client.end()));
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    messagesPerSecond: Math.round(messages / seconds),
    p50: Math.round(percentile(latencies, 0.5)),
    p99: Math.round(percentile(latencies, 0.99)),
    postgresCpu: Number(((postgresSeconds * 1000) / messages).toFixed(3)),
  };
}
