import { Database } from '../src/database/database';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';

const MESSAGE_TRACE_KEYS = ['id', 'event_type', 'data', 'consumer_group', 'worker_id', 'created_at', 'trace_names'];
const NAMED_TRACE_KEYS = [
  'id',
  'transaction_id',
  'partition_id',
  'event_type',
  'data',
  'consumer_group',
  'worker_id',
  'created_at',
  'queue_name',
  'partition_name',
  'message_payload',
  'trace_names',
];
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Traced {
  partitionId: string;
  transactionId: string;
}

/** Pushes one message per transaction id and answers where each lies. */
async function messages(client: BrokerClient, queue: string, ...transactionIds: string[]): Promise<Traced[]> {
  const pushed = await client
    .push(transactionIds.map((transactionId, n) => ({ queue, payload: { n }, transactionId })))
    .expect(201);
  expect(pushed.body.every((item: { status: string }) => item.status === 'queued')).toBe(true);
  const answer = await client.get('/api/v1/messages', { queue, limit: 1000 }).expect(200);
  return transactionIds.map((transactionId) => {
    const found = answer.body.messages.find((m: Traced) => m.transactionId === transactionId);
    return { partitionId: found.partitionId, transactionId };
  });
}

const trace = (client: BrokerClient, message: Traced, fields: Record<string, unknown> = {}) =>
  client.post('/api/v1/traces', { ...message, data: { text: 'step' }, ...fields });

const ofMessage = (client: BrokerClient, message: Traced) =>
  client.get(`/api/v1/traces/${message.partitionId}/${message.transactionId}`).expect(200);

const byName = (client: BrokerClient, name: string, query: Record<string, string | number> = {}) =>
  client.get(`/api/v1/traces/by-name/${encodeURIComponent(name)}`, query);

const names = (client: BrokerClient, query: Record<string, string | number> = {}) =>
  client.get('/api/v1/traces/names', query);

/** The tenant's rows in every trace table: none left means nothing was orphaned. */
async function traceRows(dataSource: Database, tenant: string): Promise<Record<string, number>> {
  const [row] = await sql(
    dataSource,
    `SELECT (SELECT count(*)::int FROM traces WHERE tenant_id = $1) AS traces,
            (SELECT count(*)::int FROM trace_names WHERE tenant_id = $1) AS trace_names,
            (SELECT count(*)::int FROM trace_name_messages WHERE tenant_id = $1) AS trace_name_messages,
            (SELECT count(*)::int FROM trace_name_totals WHERE tenant_id = $1) AS trace_name_totals`,
    [tenant],
  );
  return row;
}

describe('traces', () => {
  const broker = useTestBroker();

  describe('POST /api/v1/traces and the reads', () => {
    it("records traces and answers them by message, oldest first, in Queen's shape", async () => {
      const { client } = broker;
      const [order] = await messages(client, 'orders', 'order-1');

      const first = await trace(client, order, { traceNames: ['order-1', 'checkout'] }).expect(201);
      const second = await trace(client, order, {
        data: 'charged',
        eventType: 'processing',
        consumerGroup: 'billing',
        traceNames: 'order-1',
      }).expect(201);

      expect(Object.keys(first.body)).toEqual(['success', 'traceId']);
      expect(first.body).toEqual({ success: true, traceId: expect.stringMatching(UUID) });
      const answer = await ofMessage(client, order);
      expect(Object.keys(answer.body)).toEqual(['traces']);
      expect(answer.body.traces.map((entry: object) => Object.keys(entry))).toEqual([
        MESSAGE_TRACE_KEYS,
        MESSAGE_TRACE_KEYS,
      ]);
      expect(answer.body.traces).toEqual([
        {
          id: first.body.traceId,
          event_type: 'info',
          data: { text: 'step' },
          consumer_group: '__QUEUE_MODE__',
          worker_id: expect.any(String),
          created_at: expect.stringMatching(TIMESTAMP),
          trace_names: ['order-1', 'checkout'],
        },
        expect.objectContaining({
          id: second.body.traceId,
          event_type: 'processing',
          data: 'charged',
          consumer_group: 'billing',
          trace_names: ['order-1'],
        }),
      ]);
    });

    it('answers by name newest first across messages, with where each lies and its payload, and the names with their counts', async () => {
      const { client } = broker;
      const [a, b] = await messages(client, 'orders', 'a', 'b');
      await trace(client, a, { traceNames: ['flow'], data: { at: 1 } }).expect(201);
      await trace(client, b, { traceNames: ['flow', 'b-only'], data: { at: 2 } }).expect(201);
      await trace(client, a, { traceNames: ['flow'], data: { at: 3 } }).expect(201);
      await trace(client, a, { data: { at: 4 } }).expect(201);

      const flow = await byName(client, 'flow').expect(200);

      expect(Object.keys(flow.body)).toEqual(['traces', 'total', 'pagination']);
      expect(flow.body.total).toBe(3);
      expect(flow.body.pagination).toEqual({ limit: 100, offset: 0, next: null });
      expect(Object.keys(flow.body.traces[0])).toEqual(NAMED_TRACE_KEYS);
      expect(flow.body.traces.map((entry: { data: object }) => entry.data)).toEqual([{ at: 3 }, { at: 2 }, { at: 1 }]);
      expect(flow.body.traces[1]).toMatchObject({
        transaction_id: 'b',
        partition_id: b.partitionId,
        queue_name: 'orders',
        partition_name: 'Default',
        message_payload: { n: 1 },
        trace_names: ['flow', 'b-only'],
      });

      const listed = await names(client).expect(200);
      expect(listed.body).toEqual({
        trace_names: [
          { trace_name: 'flow', trace_count: 3, message_count: 2, last_seen: flow.body.traces[0].created_at },
          { trace_name: 'b-only', trace_count: 1, message_count: 1, last_seen: flow.body.traces[1].created_at },
        ],
        total: 2,
        pagination: { limit: 50, offset: 0 },
      });
      expect((await byName(client, 'nobody').expect(200)).body).toEqual({
        traces: [],
        total: 0,
        pagination: { limit: 100, offset: 0, next: null },
      });
    });

    it("answers an encrypted queue's message payload by name as it was pushed", async () => {
      const { client } = broker;
      await client.configure({ queue: 'sealed', options: { encryptionEnabled: true } }).expect(200);
      const [sealed] = await messages(client, 'sealed', 's');
      await trace(client, sealed, { traceNames: ['sealed-flow'] }).expect(201);

      const flow = await byName(client, 'sealed-flow').expect(200);

      expect(flow.body.traces[0].message_payload).toEqual({ n: 0 });
    });

    it('pages by name with limit and offset, and with next at any depth; pages the names', async () => {
      const { client } = broker;
      const [order] = await messages(client, 'orders', 'o');
      for (let n = 0; n < 5; n += 1) {
        await trace(client, order, { traceNames: ['paged', `name-${n}`], data: { n } }).expect(201);
      }
      const n = (page: { body: { traces: Array<{ data: { n: number } }> } }) =>
        page.body.traces.map((entry) => entry.data.n);

      expect(n(await byName(client, 'paged', { limit: 2 }).expect(200))).toEqual([4, 3]);
      expect(n(await byName(client, 'paged', { limit: 2, offset: 2 }).expect(200))).toEqual([2, 1]);
      expect(n(await byName(client, 'paged', { limit: 2, offset: 4 }).expect(200))).toEqual([0]);

      const seen: number[] = [];
      let after: string | undefined;
      do {
        const page = await byName(client, 'paged', after === undefined ? { limit: 2 } : { limit: 2, after }).expect(
          200,
        );
        expect(page.body.total).toBe(5);
        seen.push(...n(page));
        after = page.body.pagination.next ?? undefined;
      } while (after !== undefined);
      expect(seen).toEqual([4, 3, 2, 1, 0]);

      const page = await names(client, { limit: 2, offset: 1 }).expect(200);
      expect(page.body.total).toBe(6);
      expect(page.body.pagination).toEqual({ limit: 2, offset: 1 });
      expect(page.body.trace_names.map((name: { trace_name: string }) => name.trace_name)).toHaveLength(2);
    });

    it.each([
      ['no partitionId', { partitionId: undefined }, 400, 'transactionId and partitionId are required'],
      ['a null transactionId', { transactionId: null }, 400, 'transactionId and partitionId are required'],
      ['no data', { data: undefined }, 400, 'data is required'],
      ['null data', { data: null }, 400, 'data is required'],
      ['a partitionId not a UUID', { partitionId: 'p1' }, 400, 'partitionId must be a UUID'],
      ['an empty eventType', { eventType: '' }, 400, 'eventType must be 1 to 255 characters long'],
      ['a consumerGroup not a string', { consumerGroup: 7 }, 400, 'consumerGroup must be a string'],
      ['traceNames a number', { traceNames: 7 }, 400, 'traceNames must be an array of names or a name'],
      ['an empty trace name', { traceNames: ['ok', ''] }, 400, 'traceNames[1] must be 1 to 255 characters long'],
      [
        '21 trace names',
        { traceNames: Array.from({ length: 21 }, (_, n) => `n${n}`) },
        400,
        'traceNames must hold at most 20 names',
      ],
      ['an unknown key', { trace_names: ['x'] }, 400, 'unknown key "trace_names"; did you mean "traceNames"?'],
      ['data above 16 KiB', { data: 'x'.repeat(16 * 1024) }, 413, 'data is larger than 16384 bytes (16386)'],
    ])('refuses %s with %i and stores nothing', async (_case, fields, status, error) => {
      const { client, dataSource } = broker;
      const [order] = await messages(client, 'orders', 'o');

      const answer = await trace(client, order, fields);

      expect([answer.status, answer.body]).toEqual([status, { error }]);
      expect(await traceRows(dataSource, client.tenant)).toEqual({
        traces: 0,
        trace_names: 0,
        trace_name_messages: 0,
        trace_name_totals: 0,
      });
    });

    it.each([
      ['/api/v1/traces/by-name/x', { limit: 0 }, 'limit must be an integer between 1 and 1000'],
      ['/api/v1/traces/by-name/x', { after: 'bm9wZQ' }, 'after is not a page cursor'],
      ['/api/v1/traces/names', { offset: -1 }, 'offset must be an integer between 0 and 2147483647'],
      ['/api/v1/traces/not-a-uuid/o', {}, 'partitionId must be a UUID'],
    ])('answers GET %s?%j with 400', async (path, query, error) => {
      const answer = await broker.client.get(path, query);

      expect([answer.status, answer.body]).toEqual([400, { error }]);
    });

    it('answers 404 for a message that does not exist, and an empty list for its traces', async () => {
      const { client } = broker;
      const [order] = await messages(client, 'orders', 'o');
      const unknown = { partitionId: order.partitionId, transactionId: 'nope' };

      const answer = await trace(client, unknown);

      expect([answer.status, answer.body]).toEqual([404, { error: 'message not found' }]);
      expect((await ofMessage(client, unknown)).body).toEqual({ traces: [] });
    });

    it('keeps at most 100 traces per message and refuses the next with 409', async () => {
      const { client } = broker;
      const [order] = await messages(client, 'orders', 'o');
      for (let n = 0; n < 100; n += 1) await trace(client, order, { data: n }).expect(201);

      const answer = await trace(client, order);

      expect([answer.status, answer.body]).toEqual([409, { error: 'a message keeps at most 100 traces' }]);
      expect((await ofMessage(client, order)).body.traces).toHaveLength(100);
    });
  });

  describe('tenancy', () => {
    it("neither shows another tenant's traces nor lets it trace this tenant's messages", async () => {
      const { app, client, dataSource } = broker;
      const stranger = new BrokerClient(app, newTenant());
      const [order] = await messages(client, 'orders', 'o');
      await trace(client, order, { traceNames: ['secret'] }).expect(201);

      const write = await trace(stranger, order, { traceNames: ['planted'] });

      expect([write.status, write.body]).toEqual([404, { error: 'message not found' }]);
      expect((await ofMessage(stranger, order)).body).toEqual({ traces: [] });
      expect((await byName(stranger, 'secret').expect(200)).body.traces).toEqual([]);
      expect((await names(stranger).expect(200)).body).toMatchObject({ trace_names: [], total: 0 });
      expect((await ofMessage(client, order)).body.traces).toHaveLength(1);
      expect(await traceRows(dataSource, stranger.tenant)).toMatchObject({ traces: 0, trace_name_totals: 0 });
    });
  });

  describe('deleted with their message', () => {
    /** Two messages share "flow"; `gone` also has "gone-only". Answers what is left of "flow". */
    async function sharedName(client: BrokerClient, queue: string): Promise<{ gone: Traced; kept: Traced }> {
      const [gone, kept] = await messages(client, queue, 'gone', 'kept');
      await trace(client, gone, { traceNames: ['flow', 'gone-only'] }).expect(201);
      await trace(client, gone, { traceNames: ['flow'] }).expect(201);
      await trace(client, kept, { traceNames: ['flow'] }).expect(201);
      return { gone, kept };
    }

    async function expectOnlyKept(client: BrokerClient, gone: Traced, kept: Traced): Promise<void> {
      expect((await ofMessage(client, gone)).body).toEqual({ traces: [] });
      const flow = await byName(client, 'flow').expect(200);
      expect(flow.body.traces.map((entry: { transaction_id: string }) => entry.transaction_id)).toEqual(['kept']);
      expect(flow.body.total).toBe(1);
      const keptTrace = (await ofMessage(client, kept)).body.traces[0];
      expect((await names(client).expect(200)).body).toMatchObject({
        trace_names: [{ trace_name: 'flow', trace_count: 1, message_count: 1, last_seen: keptTrace.created_at }],
        total: 1,
      });
    }

    it('goes with a message DELETE, and the counts of a name it shared follow', async () => {
      const { client, dataSource } = broker;
      const { gone, kept } = await sharedName(client, 'orders');

      await client.delete(`/api/v1/messages/${gone.partitionId}/${gone.transactionId}`).expect(200);

      await expectOnlyKept(client, gone, kept);
      expect(await traceRows(dataSource, client.tenant)).toEqual({
        traces: 1,
        trace_names: 1,
        trace_name_messages: 1,
        trace_name_totals: 1,
      });
    });

    it('goes when retention deletes the message', async () => {
      const { app, client, dataSource } = broker;
      await client.configure({ queue: 'done', options: { completedRetentionSeconds: 60 } }).expect(200);
      const { gone, kept } = await sharedName(client, 'done');
      await client.ackAll(await client.popLeased('done', { batch: 1 })).expect(200);
      await ageMessages(dataSource, client.tenant, 61);
      await sql(dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
        client.tenant,
      ]);

      await app.get(RetentionService).runOnce([client.tenant]);

      await expectOnlyKept(client, gone, kept);
    });

    it('goes with a queue delete, leaving no row behind', async () => {
      const { client, dataSource } = broker;
      await sharedName(client, 'orders');

      await client.delete('/api/v1/resources/queues/orders').expect(200);

      expect((await names(client).expect(200)).body).toMatchObject({ trace_names: [], total: 0 });
      expect(await traceRows(dataSource, client.tenant)).toEqual({
        traces: 0,
        trace_names: 0,
        trace_name_messages: 0,
        trace_name_totals: 0,
      });
    });
  });
});
