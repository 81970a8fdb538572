import { randomUUID } from 'node:crypto';
import { Client, PoolClient } from 'pg';
import { compositeKey } from '../src/common/composite-key';
import { uuidv7 } from '../src/common/uuid';
import { loadConfig } from '../src/config/load-config';
import { queryPipelined } from '../src/database/pipelined-query';
import { PushRepository } from '../src/push/push.repository';
import { notifyStatements } from '../src/wakeup/wakeup.repository';
import { PUSH_CHANNEL } from '../src/wakeup/wakeup-channel';
import { percentile } from './http';
import { PartitionRow, storeRows } from './push-rows';
import { postgresCpu, postgresCpuSince } from './usage';

/*
 * PostgreSQL's own ceilings for a push: `connections` node-postgres clients in
 * a loop, each writing batches of `items` rows of the push workload's shape,
 * partition by partition as the push workload spreads them. Two of them:
 *
 * - 'rows': the rows alone, in the transaction a push ran before it kept
 *   counters and usage: lock the partition, insert the rows and move its last
 *   offset, commit. What the bare node:http floor (push-floor-app.ts) runs.
 * - 'push': the push's own statements (PushRepository's lock and store, the
 *   counters, cursors and usage record in it, its NOTIFY), in the push's two
 *   round trips. What is left of a push when HTTP, validation and the
 *   broker's own work are gone: the bound push ÷ ceiling is measured against.
 */

export type CeilingKind = 'rows' | 'push';

export interface CeilingResult {
  messagesPerSecond: number;
  p50: number;
  p99: number;
  /** PostgreSQL's CPU seconds per 1,000 messages. */
  postgresCpu: number;
}

/** With the queue's and the partition's names, which the push's statements lock by. */
interface NamedPartitionRow extends PartitionRow {
  queue: string;
  name: string;
}

const pushStatements = new PushRepository(loadConfig({}));
/** Each process's NOTIFYs carry an origin, as a broker's do. */
const origin = randomUUID();

/** A push as the broker sends it: BEGIN and the lock in one round trip, the store, its NOTIFY and COMMIT in the next. */
export async function storePush(
  client: Client | PoolClient,
  partition: NamedPartitionRow,
  texts: string[],
): Promise<void> {
  const { tenant_id: tenantId, queue, name } = partition;
  const lock = pushStatements.lockNamed(tenantId, new Map([[queue, new Map([[name, undefined]])]]));
  const locks = lock.parse((await queryPipelined(client as PoolClient, lock, ['BEGIN'], [])).rows);
  if (!locks) throw new Error(`partition ${name} of queue ${queue} is gone`);
  const [locked] = locks.locked;
  const messages = texts.map((payloadJson, index) => ({
    partitionId: locked.id,
    seq: locked.lastOffset + index + 1,
    id: uuidv7(),
    transactionId: uuidv7(),
    traceId: null,
    payloadJson,
    payloadBytes: Buffer.byteLength(payloadJson),
    keyId: null,
  }));
  const bytes = messages.reduce((sum, message) => sum + message.payloadBytes, 0);
  const store = pushStatements.store(
    tenantId,
    null,
    messages,
    new Map([[locked.id, locked.lastOffset + texts.length]]),
    { change: { bytes, messages: texts.length }, limits: undefined },
  );
  const count = String(texts.length);
  const notices = notifyStatements([
    { channel: PUSH_CHANNEL, payload: compositeKey(origin, tenantId, queue, count, `${name}\t${count}`) },
  ]);
  try {
    await queryPipelined(client as PoolClient, store, [], [...notices, 'COMMIT']);
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}

export async function measurePushCeiling(
  databaseUrl: string,
  queue: string,
  payload: (index: number) => unknown,
  options: { connections: number; items: number; seconds: number; kind: CeilingKind },
): Promise<CeilingResult> {
  const setup = new Client({ connectionString: databaseUrl });
  await setup.connect();
  const { rows: partitions } = await setup.query<NamedPartitionRow>(
    `SELECT p.tenant_id, p.id, q.name AS queue, p.name FROM partitions p
       JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
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
          await (options.kind === 'push' ? storePush(client, partition, texts) : storeRows(client, partition, texts));
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
