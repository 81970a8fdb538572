import { INestApplication } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { MetricsService } from '../src/metrics/metrics.service';
import { Database } from '../src/database/database';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { ScratchDatabase } from './support/scratch-database';
import { useTestBroker } from './support/test-broker';

async function retries(app: INestApplication, sqlstate: string): Promise<number> {
  const counter = app.get(MetricsService).registry.getSingleMetric('leasehold_database_retries_total');
  const values = counter ? (await counter.get()).values : [];
  return values.find((value) => value.labels.sqlstate === sqlstate)?.value ?? 0;
}

/** Each group's lag and each queue's stored messages as the counters hold them, and as the tables recount them. */
async function counted(dataSource: Database, tenant: string) {
  const [kept, recounted, stored, stores, shape, reshaped] = await Promise.all([
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name || '/' || l.consumer_group AS key, sum(l.lag) AS n FROM group_lag l
         JOIN queues q ON q.tenant_id = l.tenant_id AND q.id = l.queue_id
        WHERE l.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name || '/' || c.consumer_group AS key, sum(p.last_offset - c.committed_offset) AS n FROM consumers c
         JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
         JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id
        WHERE c.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name AS key, sum(s.messages) AS n FROM queue_stored s
         JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.queue_id
        WHERE s.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name AS key, count(*) AS n FROM messages m
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE m.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name AS key, sum(s.partitions) || '/' || sum(s.offsets) AS n FROM queue_stored s
         JOIN queues q ON q.tenant_id = s.tenant_id AND q.id = s.queue_id
        WHERE s.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
    sql<Array<{ key: string; n: string }>>(
      dataSource,
      `SELECT q.name AS key, count(*) || '/' || sum(p.last_offset) AS n FROM partitions p
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE p.tenant_id = $1 GROUP BY 1`,
      [tenant],
    ),
  ]);
  // A counter at 0 may have a row or none; compare what is not 0.
  const map = (rows: Array<{ key: string; n: string }>) =>
    Object.fromEntries(rows.filter((row) => Number(row.n) !== 0).map((row) => [row.key, Number(row.n)]));
  const shapes = (rows: Array<{ key: string; n: string }>) =>
    Object.fromEntries(rows.filter((row) => row.n !== '0/0').map((row) => [row.key, row.n]));
  return {
    lag: map(kept),
    lagRecounted: map(recounted),
    stored: map(stored),
    storedRecounted: map(stores),
    partitions: shapes(shape),
    partitionsRecounted: shapes(reshaped),
  };
}

async function expectExact(dataSource: Database, tenant: string): Promise<Record<string, number>> {
  const now = await counted(dataSource, tenant);
  expect(now.lag).toEqual(now.lagRecounted);
  expect(now.stored).toEqual(now.storedRecounted);
  expect(now.partitions).toEqual(now.partitionsRecounted);
  return now.lag;
}

/**
 * Retention rounds for the tenant, its partitions due now (with `idle`, also past the grace an emptied partition
 * gets), until `done` or 20 rounds.
 */
async function retainUntil(
  app: INestApplication,
  dataSource: Database,
  tenant: string,
  done: () => Promise<boolean>,
  { idle = false } = {},
): Promise<void> {
  await sql(
    dataSource,
    `UPDATE partitions SET retention_check_at = '-infinity'${idle ? ", last_pushed_at = now() - interval '2 hours'" : ''}
      WHERE tenant_id = $1`,
    [tenant],
  );
  for (let round = 0; round < 20; round += 1) {
    await app.get(RetentionService).runOnce([tenant]);
    if (await done()) return;
  }
}

const items = (queue: string, partitions: number, perPartition: number, tag: string) =>
  Array.from({ length: partitions * perPartition }, (_, n) => ({
    queue,
    partition: `p${n % partitions}`,
    payload: n,
    transactionId: `${tag}-${n}`,
  }));

async function drain(client: BrokerClient, queue: string, group: string): Promise<number> {
  let seen = 0;
  for (;;) {
    const answer = await client.pop(queue, { consumerGroup: group, batch: 50, partitions: 10 });
    if (answer.status === 204) return seen;
    seen += (answer.body as PopBody).messages.length;
    await client.ackAll(answer.body as PopBody).expect(200);
  }
}

describe('lag and stored counters kept by the writes', () => {
  const broker = useTestBroker();

  it('match a recount after pushes, claims, acks, nacks, autoAck, seeks, clears, deletes and retention', async () => {
    const { app, client, dataSource } = broker;
    const tenant = client.tenant;
    await client.push(items('orders', 5, 6, 'a')).expect(201);
    expect((await counted(dataSource, tenant)).stored).toEqual({ orders: 30 });

    // A group reading from the beginning makes its cursors as it goes, counting what lies past them.
    const first = await client.popLeased('orders', { consumerGroup: 'billing', batch: 4 });
    expect((await expectExact(dataSource, tenant))['orders/billing']).toBe(30);
    await client.ackAll(first).expect(200);
    expect((await expectExact(dataSource, tenant))['orders/billing']).toBe(26);

    // A nack keeps the lag; autoAck takes it at once.
    const nacked = await client.popLeased('orders', { consumerGroup: 'billing', batch: 3 });
    await client.ackAll(nacked, 'failed').expect(200);
    expect((await expectExact(dataSource, tenant))['orders/billing']).toBe(26);
    const auto = await client.popLeased('orders', { consumerGroup: 'audit', batch: 5, autoAck: 'true' });
    expect(auto.messages).toHaveLength(5);
    await expectExact(dataSource, tenant);

    // A group that starts now counts only what comes after it.
    await client.pop('orders', { consumerGroup: 'fresh', subscriptionMode: 'new' }).expect(204);
    await client.push(items('orders', 7, 1, 'b')).expect(201);
    const afterPush = await expectExact(dataSource, tenant);
    expect(afterPush['orders/fresh']).toBe(7);
    expect(afterPush['orders/billing']).toBe(33);

    // Seeks to the end and back in time; a seek of one partition.
    await client.post('/api/v1/consumer-groups/billing/queues/orders/seek', { toEnd: true }).expect(200);
    expect((await expectExact(dataSource, tenant))['orders/billing']).toBeUndefined();
    await client
      .post('/api/v1/consumer-groups/billing/queues/orders/seek', { timestamp: '2000-01-01T00:00:00Z' })
      .expect(200);
    await expectExact(dataSource, tenant);
    await client
      .post('/api/v1/consumer-groups/fresh/queues/orders/partitions/p6/seek', { timestamp: '2000-01-01T00:00:00Z' })
      .expect(200);
    await expectExact(dataSource, tenant);

    // Messages deleted one by one, moved to the dead-letter queue, and a partition cleared.
    const browsed = await client.get('/api/v1/messages', { queue: 'orders', limit: 3 }).expect(200);
    const [one, two] = (browsed.body as { messages: Array<{ partitionId: string; transactionId: string }> }).messages;
    await client.delete(`/api/v1/messages/${one.partitionId}/${one.transactionId}`).expect(200);
    await client
      .post(`/api/v1/messages/${two.partitionId}/${two.transactionId}/dlq`)
      .query({ consumerGroup: 'billing' })
      .expect(200);
    await expectExact(dataSource, tenant);
    await client.delete('/api/v1/queues/orders/clear').query({ partition: 'p1' }).expect(200);
    await expectExact(dataSource, tenant);

    // Retention: completed messages deleted, pending ones cut past by every group.
    await client
      .configure({ queue: 'orders', options: { completedRetentionSeconds: 1, retentionSeconds: 2 } })
      .expect(200);
    await drain(client, 'orders', 'audit');
    await ageMessages(dataSource, tenant, 10);
    await retainUntil(app, dataSource, tenant, async () => {
      const [{ stored }] = await sql<Array<{ stored: number }>>(
        dataSource,
        'SELECT count(*)::int AS stored FROM messages WHERE tenant_id = $1',
        [tenant],
      );
      return stored === 0;
    });
    const afterRetention = await counted(dataSource, tenant);
    expect(afterRetention.storedRecounted).toEqual({});
    await expectExact(dataSource, tenant);

    // Emptied partitions past their grace are removed, and counted out of the queue's partitions and offsets.
    await retainUntil(
      app,
      dataSource,
      tenant,
      async () => Object.keys((await counted(dataSource, tenant)).partitionsRecounted).length === 0,
      { idle: true },
    );
    expect((await counted(dataSource, tenant)).partitionsRecounted).toEqual({});
    await expectExact(dataSource, tenant);

    // Deleting a group, then the queue, takes their counters with them.
    await client.delete('/api/v1/consumer-groups/fresh').expect(200);
    const [{ rows }] = await sql<Array<{ rows: number }>>(
      dataSource,
      `SELECT count(*)::int AS rows FROM group_lag WHERE tenant_id = $1 AND consumer_group = 'fresh'`,
      [tenant],
    );
    expect(rows).toBe(0);
    await client.delete('/api/v1/resources/queues/orders').expect(200);
    const [{ left }] = await sql<Array<{ left: number }>>(
      dataSource,
      `SELECT (SELECT count(*) FROM group_lag WHERE tenant_id = $1) + (SELECT count(*) FROM queue_stored
                WHERE tenant_id = $1) AS left`,
      [tenant],
    );
    expect(Number(left)).toBe(0);
  });

  (onEmbeddedDatabase ? describe.skip : describe)('under concurrent writers (real PostgreSQL)', () => {
    it('stays exact while pushes, a group looking through its partitions and draining groups race', async () => {
      const { client, dataSource } = broker;
      const tenant = client.tenant;
      await client.push(items('busy', 40, 3, 'seed')).expect(201);
      await client.pop('busy', { consumerGroup: 'late', subscriptionMode: 'new' }).expect(204);

      const pushes = Array.from({ length: 8 }, (_, round) =>
        client.push(items('busy', 40, 2, `r${round}`)).expect(201),
      );
      const readers = ['one', 'two', 'three'].map((group) => drain(client, 'busy', group));
      await Promise.all([...pushes, ...readers]);
      await Promise.all(['one', 'two', 'three', 'late'].map((group) => drain(client, 'busy', group)));

      const lag = await expectExact(dataSource, tenant);
      expect(lag).toEqual({});
      expect((await counted(dataSource, tenant)).stored).toEqual({ busy: 40 * 3 + 8 * 40 * 2 });
    });
  });
});

/**
 * Each write to the three counters, in the order PostgreSQL made it: a row trigger per table logs the transaction, the
 * tenant and the table, in a table of its own. Triggers fire in the order rows are written, so also in the order a
 * statement's data-modifying CTEs run (the reverse of their text when nothing reads them).
 */
async function logCounterWrites(dataSource: Database): Promise<void> {
  await sql(
    dataSource,
    `CREATE TABLE counter_writes (seq bigserial PRIMARY KEY, txid bigint NOT NULL, tenant_id uuid, counter text NOT NULL)`,
  );
  await sql(
    dataSource,
    `CREATE FUNCTION counter_written() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO counter_writes (txid, tenant_id, counter)
       VALUES (txid_current(), CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END, TG_TABLE_NAME);
       RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
     END $$`,
  );
  for (const table of COUNTER_ORDER) {
    await sql(
      dataSource,
      `CREATE TRIGGER counter_written BEFORE INSERT OR UPDATE OR DELETE ON ${table}
         FOR EACH ROW EXECUTE FUNCTION counter_written()`,
    );
  }
}

/** docs/internals.md, "Counters of lag and depth": the one order every transaction takes the counters' stripes in. */
const COUNTER_ORDER = ['group_lag', 'queue_stored', 'tenant_usage'];

/** The tenant's transactions that wrote a counter after one that comes later in COUNTER_ORDER, as the tables they wrote in turn. */
async function countersOutOfOrder(dataSource: Database, tenant: string): Promise<string[]> {
  const rows = await sql<Array<{ written: string }>>(
    dataSource,
    `WITH ranked AS (
       SELECT seq, txid, counter, array_position($2::text[], counter) AS rank FROM counter_writes WHERE tenant_id = $1
     ), runs AS (
       -- Consecutive writes to one table as one step.
       SELECT txid, counter, seq, rank, rank IS DISTINCT FROM lag(rank) OVER (PARTITION BY txid ORDER BY seq) AS starts
         FROM ranked
     )
     SELECT string_agg(counter, ' > ' ORDER BY seq) AS written FROM runs
      WHERE starts AND txid IN (SELECT a.txid FROM ranked a JOIN ranked b ON b.txid = a.txid AND b.seq > a.seq
                                 WHERE b.rank < a.rank)
      GROUP BY txid`,
    [tenant, COUNTER_ORDER],
  );
  return rows.map((row) => row.written);
}

// A database of its own: the triggers would otherwise sit on tables every test file of the run writes to.
(onEmbeddedDatabase ? describe.skip : describe)(
  'the order every transaction writes the counters in (real PostgreSQL)',
  () => {
    let scratch: ScratchDatabase;
    let app: NestExpressApplication;
    let dataSource: Database;

    beforeAll(async () => {
      // The broker migrates it as it starts.
      scratch = await ScratchDatabase.create('leasehold_counter_order', { migrated: false });
      app = await createTestApp({ DATABASE_URL: scratch.url });
      dataSource = app.get(Database);
      await logCounterWrites(dataSource);
    });

    afterAll(async () => {
      await app?.close();
      await scratch?.drop();
    });

    // Two connections share a stripe of each counter, so two transactions taking the tables in different orders can
    // deadlock (PostgreSQL then rolls one back after deadlock_timeout). Every write that changes a counter, here.
    it('is group_lag, then queue_stored, then tenant_usage, in every write that changes them', async () => {
      const client = new BrokerClient(app, newTenant());
      const tenant = client.tenant;
      // Pushes creating a queue and its partitions; a group's first pops making cursors; acks.
      await client.push(items('flow', 4, 5, 'a')).expect(201);
      await client.ackAll(await client.popLeased('flow', { consumerGroup: 'one', batch: 5 })).expect(200);
      await client.popLeased('flow', { consumerGroup: 'two', batch: 2 });
      // Pushes creating partitions of a queue with groups: cursors, lag, stored messages and usage at once.
      await client.push(items('flow', 8, 2, 'b')).expect(201);
      await client.pop('flow', { consumerGroup: 'auto', batch: 3, autoAck: 'true' }).expect(200);

      // A transaction of acks and pushes.
      const batch = await client.popLeased('flow', { consumerGroup: 'one', batch: 5 });
      await client
        .post('/api/v1/transaction', {
          operations: [
            ...batch.messages.map((message) => ({
              type: 'ack',
              transactionId: message.transactionId,
              partitionId: message.partitionId,
              leaseId: batch.leaseId,
              consumerGroup: 'one',
            })),
            { type: 'push', items: [...items('flow', 10, 1, 't'), ...items('out', 2, 2, 't')] },
          ],
          requiredLeases: [batch.leaseId],
        })
        .expect(200);

      // Failed past the retry limit: a dead letter.
      await client.configure({ queue: 'flow', options: { retryLimit: 0, deadLetterQueue: true } }).expect(200);
      await client.ackAll(await client.popLeased('flow', { consumerGroup: 'one', batch: 2 }), 'failed').expect(200);

      // A stream cycle: its state, its sink's pushes and its source's ack in one transaction.
      const registered = await client
        .post('/streams/v1/queries', { name: 'sums', source_queue: 'flow', sink_queue: 'sums', config_hash: 'h' })
        .expect(200);
      const queryId = registered.body.query_id as string;
      const source = await client.popLeased('flow', { consumerGroup: `streams.${queryId}`, batch: 3 });
      const last = source.messages[source.messages.length - 1];
      await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: last.partitionId,
          consumer_group: `streams.${queryId}`,
          state_ops: [{ type: 'upsert', key: 'sum', value: { sum: source.messages.length } }],
          push_items: [{ queue: 'sums', payload: { sum: source.messages.length } }],
          ack: { transactionId: last.transactionId, leaseId: source.leaseId, status: 'completed', count: 3 },
        })
        .expect(200);

      // Seeks, a message deleted and one moved to the dead letters by hand, a partition cleared.
      await client.post('/api/v1/consumer-groups/two/queues/flow/seek', { toEnd: true }).expect(200);
      await client
        .post('/api/v1/consumer-groups/two/queues/flow/seek', { timestamp: '2000-01-01T00:00:00Z' })
        .expect(200);
      const browsed = await client.get('/api/v1/messages', { queue: 'flow', limit: 2 }).expect(200);
      const [one, two] = (browsed.body as { messages: Array<{ partitionId: string; transactionId: string }> }).messages;
      await client.delete(`/api/v1/messages/${one.partitionId}/${one.transactionId}`).expect(200);
      await client
        .post(`/api/v1/messages/${two.partitionId}/${two.transactionId}/dlq`)
        .query({ consumerGroup: 'two' })
        .expect(200);
      await client.delete('/api/v1/queues/flow/clear').query({ partition: 'p1' }).expect(200);

      // Retention's cut and its removal of emptied partitions.
      await client
        .configure({ queue: 'flow', options: { completedRetentionSeconds: 1, retentionSeconds: 2 } })
        .expect(200);
      await ageMessages(dataSource, tenant, 10);
      await retainUntil(
        app,
        dataSource,
        tenant,
        async () => {
          const [{ left }] = await sql<Array<{ left: number }>>(
            dataSource,
            `SELECT count(*)::int AS left FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
              WHERE p.tenant_id = $1 AND q.name = 'flow'`,
            [tenant],
          );
          return left === 0;
        },
        { idle: true },
      );

      // A group, a stream query and the queues deleted, with their counters; a whole queue cleared.
      await client.delete('/api/v1/consumer-groups/two').expect(200);
      await client.delete('/streams/v1/queries/sums').expect(200);
      await client.delete('/api/v1/queues/out/clear').expect(200);
      await client.delete('/api/v1/resources/queues/out').expect(200);
      await client.delete('/api/v1/resources/queues/flow').expect(200);

      const [{ written }] = await sql<Array<{ written: string[] }>>(
        dataSource,
        'SELECT array_agg(DISTINCT counter ORDER BY counter) AS written FROM counter_writes WHERE tenant_id = $1',
        [tenant],
      );
      expect(written).toEqual([...COUNTER_ORDER].sort());
      expect(await countersOutOfOrder(dataSource, tenant)).toEqual([]);
    });
  },
);

describe('depth and lag on /metrics', () => {
  const broker = useTestBroker({ METRICS_TENANT_LABELS: 'true' });

  it('are read from the counters: a group its lag, a queue its furthest-behind group, or what it stores', async () => {
    const { app, client } = broker;
    await client.push(items('depths', 3, 4, 'd')).expect(201);
    await client.push(items('idle', 2, 2, 'i')).expect(201);
    const read = await client.popLeased('depths', { consumerGroup: 'fast', batch: 12, partitions: 3 });
    await client.ackAll(read).expect(200);
    await client.popLeased('depths', { consumerGroup: 'slow', batch: 2 });

    const text = (await request(app.getHttpServer()).get('/metrics').expect(200)).text;
    const sample = (name: string, labels: string) =>
      text
        .split('\n')
        .find((row) => row.startsWith(`${name}{tenant="${client.tenant}",${labels}}`))
        ?.split(' ')[1];
    expect(sample('leasehold_consumer_lag_messages', 'queue="depths",consumer_group="slow"')).toBe('12');
    expect(sample('leasehold_consumer_lag_messages', 'queue="depths",consumer_group="fast"')).toBe('0');
    expect(sample('leasehold_queue_depth_messages', 'queue="depths"')).toBe('12');
    expect(sample('leasehold_queue_depth_messages', 'queue="idle"')).toBe('4');
  });
});

// Seventeen connections or more: two of them share a stripe of the counters (their pids modulo 16).
const CONNECTIONS = 20;

(onEmbeddedDatabase ? describe.skip : describe)('counters of a pool wider than their stripes (real PostgreSQL)', () => {
  const wide = useTestBroker({ DB_POOL_SIZE: String(CONNECTIONS) });

  // Each write takes its stripe's counter rows (its connection's pid modulo 16) in one order: a push that created a
  // partition took queue_stored in that statement, before its store took tenant_usage, while another push's store
  // took tenant_usage first, and two connections on one stripe deadlocked (PostgreSQL then rolls one back after a
  // second, and the unit of work runs it again: counted by leasehold_database_retries_total).
  it('never deadlock when pushes creating partitions race pushes to existing ones', async () => {
    const { app, client, dataSource } = wide;
    const tenant = client.tenant;
    const before = await retries(app, '40P01');
    // A deadlock needs two connections of one stripe in the same instant: 30 rounds showed 4-6 before the fix.
    for (let round = 0; round < 30; round += 1) {
      const queue = `first-${round}`;
      // A group reading the queue: each partition created gets its cursor, each push adds to its lag.
      await client.push([{ queue, partition: 'seed', payload: 0 }]).expect(201);
      await client.popLeased(queue, { consumerGroup: 'reader' });
      // As many at a time as the pool has connections: the first of them create a partition each.
      let next = 0;
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          for (let push = 0; push < 4; push += 1) {
            const partition = next++ % (CONNECTIONS + 5);
            await client
              .push(Array.from({ length: 20 }, (_, n) => ({ queue, partition: `p${partition}`, payload: n })))
              .expect(201);
          }
        }),
      );
    }
    expect(await retries(app, '40P01')).toBe(before);
    const now = await expectExact(dataSource, tenant);
    expect(now['first-0/reader']).toBe(1 + CONNECTIONS * 4 * 20);
  });
});
