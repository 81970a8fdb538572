import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { BrokerClient, PopBody, PopMessage } from './support/broker-client';
import { expireLeases, sql } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';

const HASH = 'a'.repeat(64);
const WINDOW_MS = 60_000;
const SEP = '\u001f';

interface Reading {
  ts: number;
  amount: number;
}

/**
 * What Queen's SDK does for `.windowTumbling(60 s, event time).reduce(sum).to(sink)`, reduced to its wire calls: pop
 * a batch under the query's group, read the partition's state, add each reading to its window, close the windows the
 * watermark (the newest event time) has passed by pushing their sums and deleting their state, then commit state,
 * pushes and the ack of the batch's last message in one cycle.
 */
async function tumblingSumStep(client: BrokerClient, queryId: string, source: string, sink: string): Promise<number> {
  const popped = await client.pop(source, { consumerGroup: `streams.${queryId}`, batch: 100 });
  if (popped.status === 204) return 0;
  const batch = popped.body as PopBody;
  const partitionId = batch.partitionId;
  const state = await client.post('/streams/v1/state/get', { query_id: queryId, partition_id: partitionId, keys: [] });
  expect(state.status).toBe(200);
  const windows = new Map<string, { acc: number; windowStart: number; windowEnd: number }>(
    state.body.rows.map((row: { key: string; value: { acc: number; windowStart: number; windowEnd: number } }) => [
      row.key,
      row.value,
    ]),
  );
  let watermark = -Infinity;
  for (const message of batch.messages) {
    const { ts, amount } = message.data as Reading;
    const windowStart = Math.floor(ts / WINDOW_MS) * WINDOW_MS;
    const key = `tumb:60${SEP}${batch.partition}${SEP}${windowStart}`;
    const open = windows.get(key) ?? { acc: 0, windowStart, windowEnd: windowStart + WINDOW_MS };
    open.acc += amount;
    windows.set(key, open);
    watermark = Math.max(watermark, ts);
  }
  const stateOps: unknown[] = [];
  const pushItems: unknown[] = [];
  for (const [key, window] of [...windows].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (window.windowEnd <= watermark) {
      pushItems.push({
        queue: sink,
        partition: batch.partition,
        payload: { windowStart: window.windowStart, sum: window.acc },
      });
      stateOps.push({ type: 'delete', key });
    } else {
      stateOps.push({ type: 'upsert', key, value: window });
    }
  }
  const last = batch.messages[batch.messages.length - 1];
  const cycle = await client.post('/streams/v1/cycle', {
    query_id: queryId,
    partition_id: partitionId,
    consumer_group: `streams.${queryId}`,
    state_ops: stateOps,
    push_items: pushItems,
    ack: {
      transactionId: last.transactionId,
      leaseId: batch.leaseId,
      status: 'completed',
      count: batch.messages.length,
    },
    release_lease: true,
  });
  expect([cycle.status, cycle.body.error, cycle.body.success]).toEqual([200, undefined, true]);
  return batch.messages.length;
}

async function pushReadings(client: BrokerClient, queue: string, partition: string, readings: Reading[], tag: string) {
  const response = await client.push(
    readings.map((payload, n) => ({ queue, partition, payload, transactionId: `${tag}-${n}` })),
  );
  expect(response.status).toBe(201);
}

async function drain(client: BrokerClient, queue: string): Promise<unknown[]> {
  const popped = await client.pop(queue, { batch: 100, autoAck: true });
  return popped.status === 204 ? [] : (popped.body as PopBody).messages.map((message: PopMessage) => message.data);
}

function register(client: BrokerClient, name: string, source: string, body: Record<string, unknown> = {}) {
  return client.post('/streams/v1/queries', {
    name,
    source_queue: source,
    sink_queue: `${source}.sums`,
    config_hash: HASH,
    ...body,
  });
}

async function stateRows(dataSource: Database, tenant: string): Promise<number> {
  const [row] = await sql<Array<{ n: number }>>(
    dataSource,
    'SELECT count(*)::int AS n FROM stream_state WHERE tenant_id = $1',
    [tenant],
  );
  return row.n;
}

describe('streams (/streams/v1)', () => {
  const broker = useTestBroker();

  describe('registering a query', () => {
    it('registers once by name, resumes with the same hash, refuses another unless reset, which deletes the state', async () => {
      const { client, dataSource } = broker;
      const first = await register(client, 'q', 'readings').expect(200);
      expect(first.body).toMatchObject({ success: true, name: 'q', config_hash: HASH, fresh: true, reset: false });
      const again = await register(client, 'q', 'readings').expect(200);
      expect(again.body).toMatchObject({ query_id: first.body.query_id, fresh: false, reset: false });

      await pushReadings(client, 'readings', 'p', [{ ts: 10_000, amount: 1 }], 'r');
      expect(await tumblingSumStep(client, first.body.query_id, 'readings', 'readings.sums')).toBe(1);
      expect(await stateRows(dataSource, client.tenant)).toBe(1);

      const changed = await register(client, 'q', 'readings', { config_hash: 'b'.repeat(64) }).expect(409);
      expect(changed.body).toMatchObject({ success: false, query_id: first.body.query_id });
      expect(changed.body.error).toMatch(/^config_hash mismatch/);
      expect(await stateRows(dataSource, client.tenant)).toBe(1);

      const reset = await register(client, 'q', 'readings', { config_hash: 'b'.repeat(64), reset: true }).expect(200);
      expect(reset.body).toMatchObject({ query_id: first.body.query_id, fresh: false, reset: true });
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
    });

    it('refuses a body without what the SDK sends, naming the field', async () => {
      const { client } = broker;
      const missing = await client.post('/streams/v1/queries', { name: 'q', source_queue: 'readings' }).expect(400);
      expect(missing.body).toEqual({ error: 'config_hash is required' });
      await client
        .post('/streams/v1/queries', { name: 'q', source_queue: 'readings', config_hash: HASH, extra: 1 })
        .expect(400);
    });
  });

  describe('cycles', () => {
    it('closes tumbling windows across cycles: each sum emitted once, only the open window kept', async () => {
      const { client, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'sums', 'src').expect(200)).body;

      await pushReadings(
        client,
        'src',
        'meter-1',
        [
          { ts: 1_000, amount: 2 },
          { ts: 30_000, amount: 3 },
        ],
        'a',
      );
      await tumblingSumStep(client, queryId, 'src', 'sums');
      expect(await drain(client, 'sums')).toEqual([]);

      await pushReadings(
        client,
        'src',
        'meter-1',
        [
          { ts: 59_000, amount: 5 },
          { ts: 61_000, amount: 7 },
        ],
        'b',
      );
      await tumblingSumStep(client, queryId, 'src', 'sums');
      expect(await drain(client, 'sums')).toEqual([{ windowStart: 0, sum: 10 }]);

      await pushReadings(client, 'src', 'meter-1', [{ ts: 125_000, amount: 1 }], 'c');
      await tumblingSumStep(client, queryId, 'src', 'sums');
      expect(await drain(client, 'sums')).toEqual([{ windowStart: 60_000, sum: 7 }]);

      await client.pop('src', { consumerGroup: `streams.${queryId}` }).expect(204);
      const rows = await client
        .post('/streams/v1/state/get', {
          query_id: queryId,
          partition_id: await partitionId(dataSource, client, 'src', 'meter-1'),
          keys: [],
        })
        .expect(200);
      expect(rows.body.rows.map((row: { value: unknown }) => row.value)).toEqual([
        { acc: 1, windowStart: 120_000, windowEnd: 180_000 },
      ]);
    });

    it("refuses a zombie worker's cycle once its lease was lost and another worker claimed the batch", async () => {
      const { client, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'zombie', 'zsrc').expect(200)).body;
      await pushReadings(client, 'zsrc', 'p', [{ ts: 1, amount: 1 }], 'z');
      const group = `streams.${queryId}`;
      const zombie = await client.popLeased('zsrc', { consumerGroup: group });
      await expireLeases(dataSource, client.tenant, zombie.leaseId!);
      const live = await client.popLeased('zsrc', { consumerGroup: group });

      const refused = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: zombie.partitionId,
          consumer_group: group,
          state_ops: [{ type: 'upsert', key: 'k', value: { acc: 1 } }],
          push_items: [{ queue: 'zsink', payload: { from: 'zombie' } }],
          ack: { transactionId: 'z-0', leaseId: zombie.leaseId, status: 'completed', count: 1 },
        })
        .expect(409);

      expect(refused.body).toMatchObject({ success: false, reason: 'lease_lost', query_id: queryId });
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
      expect(await drain(client, 'zsink')).toEqual([]);
      // The live holder's cycle, fenced by its epoch, commits.
      const committed = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: live.partitionId,
          consumer_group: group,
          push_items: [{ queue: 'zsink', payload: { from: 'live' } }],
          ack: { transactionId: 'z-0', leaseId: live.leaseId, leaseEpoch: live.messages[0].leaseEpoch },
        })
        .expect(200);
      expect(committed.body.ack_result).toMatchObject({ success: true, lease_released: true });
      expect(await drain(client, 'zsink')).toEqual([{ from: 'live' }]);
    });

    it('refuses a cycle naming an earlier claim by its epoch, even with the live leaseId', async () => {
      const { client } = broker;
      const { query_id: queryId } = (await register(client, 'epochs', 'esrc').expect(200)).body;
      await pushReadings(client, 'esrc', 'p', [{ ts: 1, amount: 1 }], 'e');
      const first = await client.popLeased('esrc', { consumerGroup: 'g' });
      await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: first.partitionId,
          consumer_group: 'g',
          ack: { transactionId: 'e-0', status: 'retry', leaseId: first.leaseId },
        })
        .expect(200);
      const second = await client.popLeased('esrc', { consumerGroup: 'g' });

      const refused = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: second.partitionId,
          consumer_group: 'g',
          ack: { transactionId: 'e-0', leaseId: second.leaseId, leaseEpoch: first.messages[0].leaseEpoch },
        })
        .expect(409);
      expect(refused.body.reason).toBe('lease_lost');
    });

    it('with release_lease false, moves the cursor but keeps the lease: the rest comes back in order when it ends', async () => {
      const { client, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'gate', 'gsrc').expect(200)).body;
      await pushReadings(
        client,
        'gsrc',
        'p',
        [1, 2, 3].map((amount) => ({ ts: amount, amount })),
        'g',
      );
      const popped = await client.popLeased('gsrc', { consumerGroup: 'gate', batch: 3 });

      const partial = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: popped.partitionId,
          consumer_group: 'gate',
          ack: { transactionId: 'g-0', leaseId: popped.leaseId, count: 1 },
          release_lease: false,
        })
        .expect(200);
      expect(partial.body.ack_result).toMatchObject({ lease_released: false });
      await client.pop('gsrc', { consumerGroup: 'gate' }).expect(204);

      await expireLeases(dataSource, client.tenant, popped.leaseId!);
      const again = await client.popLeased('gsrc', { consumerGroup: 'gate', batch: 3 });
      expect(again.messages.map((message) => message.transactionId)).toEqual(['g-1', 'g-2']);
    });

    it('with release_lease true, ends the lease at a partial ack so the rest comes back at once', async () => {
      const { client } = broker;
      const { query_id: queryId } = (await register(client, 'partial', 'psrc').expect(200)).body;
      await pushReadings(
        client,
        'psrc',
        'p',
        [1, 2].map((amount) => ({ ts: amount, amount })),
        'p',
      );
      const popped = await client.popLeased('psrc', { consumerGroup: 'partial', batch: 2 });

      const cycle = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: popped.partitionId,
          consumer_group: 'partial',
          ack: { transactionId: 'p-0', leaseId: popped.leaseId },
        })
        .expect(200);
      expect(cycle.body.ack_result).toMatchObject({ lease_released: true });
      const rest = await client.popLeased('psrc', { consumerGroup: 'partial' });
      expect(rest.messages.map((message) => message.transactionId)).toEqual(['p-1']);
    });

    it('commits a flush without an ack: state deletes and pushes only', async () => {
      const { client, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'flush', 'fsrc').expect(200)).body;
      await pushReadings(client, 'fsrc', 'p', [{ ts: 1, amount: 4 }], 'f');
      await tumblingSumStep(client, queryId, 'fsrc', 'fsink');
      const partition = await partitionId(dataSource, client, 'fsrc', 'p');
      const ripe = await client
        .post('/streams/v1/state/get', {
          query_id: queryId,
          partition_id: partition,
          keys: [],
          key_prefix: `tumb:60${SEP}`,
          ripe_at_or_before: WINDOW_MS,
        })
        .expect(200);
      expect(ripe.body.rows).toHaveLength(1);
      const notYet = await client
        .post('/streams/v1/state/get', { query_id: queryId, partition_id: partition, ripe_at_or_before: WINDOW_MS - 1 })
        .expect(200);
      expect(notYet.body.rows).toEqual([]);

      await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: partition,
          state_ops: [{ type: 'delete', key: ripe.body.rows[0].key }],
          push_items: [{ queue: 'fsink', partition: 'p', payload: { sum: ripe.body.rows[0].value.acc } }],
          ack: null,
        })
        .expect(200);
      expect(await drain(client, 'fsink')).toEqual([{ sum: 4 }]);
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
    });

    it('answers 404 for a query of another tenant, and 409 for a partition outside the source queue, storing nothing', async () => {
      const { client, app, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'mine', 'msrc').expect(200)).body;
      await pushReadings(client, 'msrc', 'p', [{ ts: 1, amount: 1 }], 'm');
      await pushReadings(client, 'other', 'p', [{ ts: 1, amount: 1 }], 'o');
      const partition = await partitionId(dataSource, client, 'msrc', 'p');
      const stranger = new BrokerClient(app, newTenant());

      await stranger
        .post('/streams/v1/cycle', { query_id: queryId, partition_id: partition, state_ops: [] })
        .expect(404);
      // The state write and the pushes go out before the query is found missing: they are rolled back with the refusal.
      await stranger
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: partition,
          state_ops: [{ type: 'upsert', key: 'k', value: 1 }],
          push_items: [{ queue: 'stranger-sink', payload: 1 }],
        })
        .expect(404);
      expect(await stateRows(dataSource, stranger.tenant)).toBe(0);
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
      await stranger.get('/api/v1/pop/queue/stranger-sink').expect(204);
      await stranger.post('/streams/v1/state/get', { query_id: queryId, partition_id: partition }).expect(404);
      const outside = await client
        .post('/streams/v1/cycle', {
          query_id: queryId,
          partition_id: await partitionId(dataSource, client, 'other', 'p'),
          state_ops: [{ type: 'upsert', key: 'k', value: 1 }],
        })
        .expect(409);
      expect(outside.body.reason).toBe('ack_rejected');
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
    });

    it.each([
      [{ partition_id: 'p' }, 'partition_id must be a UUID'],
      [{ state_ops: [{ type: 'merge', key: 'k' }] }, 'state_ops[0].type must be upsert or delete'],
      [{ state_ops: [{ type: 'upsert', key: '' }] }, 'state_ops[0].key must be 1 to 1024 characters long'],
      [
        { state_ops: [{ type: 'upsert', key: 'k', value: 'a\u0000b' }] },
        'state_ops[0].value must not contain the character \\u0000',
      ],
      [{ push_items: [{ payload: 1 }] }, 'push_items[0].queue is required'],
      [{ ack: { leaseId: 'x' } }, 'ack.transactionId is required'],
    ])('refuses %j with a 400 naming the field, and applies nothing', async (fields, error) => {
      const { client } = broker;
      const { query_id: queryId } = (await register(client, 'strict', 'ssrc').expect(200)).body;
      const body = { query_id: queryId, partition_id: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92', ...fields };

      const refused = await client.post('/streams/v1/cycle', body).expect(400);

      expect(refused.body).toEqual({ error });
    });
  });

  describe('lifetime', () => {
    it('keeps state across a broker restart, and the resumed query carries on from it', async () => {
      const tenant = newTenant();
      let app: NestExpressApplication = await createTestApp();
      let client = new BrokerClient(app, tenant);
      const { query_id: queryId } = (await register(client, 'durable', 'dsrc').expect(200)).body;
      await pushReadings(client, 'dsrc', 'p', [{ ts: 1_000, amount: 6 }], 'd1');
      await tumblingSumStep(client, queryId, 'dsrc', 'dsink');
      await app.close();

      app = await createTestApp();
      try {
        client = new BrokerClient(app, tenant);
        const resumed = await register(client, 'durable', 'dsrc').expect(200);
        expect(resumed.body).toMatchObject({ query_id: queryId, fresh: false, reset: false });
        await pushReadings(
          client,
          'dsrc',
          'p',
          [
            { ts: 2_000, amount: 4 },
            { ts: 60_000, amount: 1 },
          ],
          'd2',
        );
        await tumblingSumStep(client, queryId, 'dsrc', 'dsink');
        expect(await drain(client, 'dsink')).toEqual([{ windowStart: 0, sum: 10 }]);
      } finally {
        await app.close();
      }
    });

    it('lists queries, and deletes a query with its state, or with its source queue', async () => {
      const { client, dataSource } = broker;
      const { query_id: queryId } = (await register(client, 'listed', 'lsrc').expect(200)).body;
      await register(client, 'doomed', 'dsrc2').expect(200);
      await pushReadings(client, 'lsrc', 'p', [{ ts: 1, amount: 1 }], 'l');
      await tumblingSumStep(client, queryId, 'lsrc', 'lsink');

      const listed = await client.get('/streams/v1/queries').expect(200);
      expect(listed.body.queries.map((query: { name: string }) => query.name)).toEqual(['doomed', 'listed']);
      await client.delete('/streams/v1/queries/doomed').expect(200);
      await client.delete('/streams/v1/queries/doomed').expect(404);

      await client.delete('/api/v1/resources/queues/lsrc').expect(200);
      expect((await client.get('/streams/v1/queries').expect(200)).body.queries).toEqual([]);
      expect(await stateRows(dataSource, client.tenant)).toBe(0);
      await client.post('/streams/v1/state/get', { query_id: queryId, partition_id: queryId }).expect(404);
    });
  });

  describe('state and the storage quotas', () => {
    const usage = async (client: BrokerClient) => {
      const quotas = (await client.get('/api/v1/resources/quotas').expect(200)).body.quotas as Array<{
        quota: string;
        used: number;
      }>;
      const used = (quota: string) => quotas.find((entry) => entry.quota === quota)!.used;
      return { bytes: used('storedBytes'), entries: used('storedMessages') };
    };
    const stateCycle = (client: BrokerClient, queryId: string, partition: string, stateOps: unknown[]) =>
      client.post('/streams/v1/cycle', { query_id: queryId, partition_id: partition, state_ops: stateOps });
    const sourceWithQuery = async (client: BrokerClient, source: string, name: string) => {
      const queryId = (await register(client, name, source).expect(200)).body.query_id as string;
      await pushReadings(client, source, 'p0', [{ ts: 0, amount: 1 }], name);
      const popped = await client.popLeased(source, { consumerGroup: 'look', autoAck: 'true' });
      return { queryId, partition: popped.partitionId };
    };
    // As PostgreSQL writes a jsonb value out: key and value are what a state entry counts.
    const value = { acc: 12, windowEnd: 60_000, windowStart: 0 };
    const bytesOf = (key: string) =>
      Buffer.byteLength(key) + Buffer.byteLength('{"acc": 12, "windowEnd": 60000, "windowStart": 0}');

    it('counts each entry and its bytes while kept, and frees them with a delete, a reset, the query and its queue', async () => {
      const { client } = broker;
      const { queryId, partition } = await sourceWithQuery(client, 'metered', 'm');
      const base = await usage(client);

      await stateCycle(client, queryId, partition, [
        { type: 'upsert', key: 'k1', value },
        { type: 'upsert', key: 'k2', value },
      ]).expect(200);
      expect(await usage(client)).toEqual({
        bytes: base.bytes + bytesOf('k1') + bytesOf('k2'),
        entries: base.entries + 2,
      });

      await stateCycle(client, queryId, partition, [
        { type: 'upsert', key: 'k1', value },
        { type: 'delete', key: 'k2' },
      ]).expect(200);
      expect(await usage(client)).toEqual({ bytes: base.bytes + bytesOf('k1'), entries: base.entries + 1 });

      await register(client, 'm', 'metered', { config_hash: 'b'.repeat(64), reset: true }).expect(200);
      expect(await usage(client)).toEqual(base);

      await stateCycle(client, queryId, partition, [{ type: 'upsert', key: 'k3', value }]).expect(200);
      await client.delete('/streams/v1/queries/m').expect(200);
      expect(await usage(client)).toEqual(base);

      const again = (await register(client, 'm2', 'metered').expect(200)).body.query_id as string;
      await stateCycle(client, again, partition, [{ type: 'upsert', key: 'k4', value }]).expect(200);
      await client.delete('/api/v1/resources/queues/metered').expect(200);
      expect(await usage(client)).toEqual({ bytes: 0, entries: 0 });
    });

    describe('at TENANT_MAX_STORED_BYTES', () => {
      const small = useTestBroker({ TENANT_MAX_STORED_BYTES: '300' });

      it('refuses a cycle whose state would pass it, with 403, and keeps nothing of it', async () => {
        const { client, dataSource } = small;
        const { queryId, partition } = await sourceWithQuery(client, 'tight', 't');

        const refused = await stateCycle(client, queryId, partition, [
          { type: 'upsert', key: 'big', value: { text: 'x'.repeat(400) } },
        ]).expect(403);

        expect(refused.body.error).toBe(
          'quota exceeded: a tenant may store at most 300 payload bytes (TENANT_MAX_STORED_BYTES)',
        );
        expect(await stateRows(dataSource, client.tenant)).toBe(0);
        await stateCycle(client, queryId, partition, [{ type: 'upsert', key: 'ok', value: 1 }]).expect(200);
        expect(await stateRows(dataSource, client.tenant)).toBe(1);
      });
    });
  });
});

async function partitionId(
  dataSource: Database,
  client: BrokerClient,
  queue: string,
  partition: string,
): Promise<string> {
  const [row] = await sql<Array<{ id: string }>>(
    dataSource,
    `SELECT p.id FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE p.tenant_id = $1 AND q.name = $2 AND p.name = $3`,
    [client.tenant, queue, partition],
  );
  return row.id;
}
