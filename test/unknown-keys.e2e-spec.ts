import request from 'supertest';
import { BrokerClient, PopBody } from './support/broker-client';
import { tenantSnapshot } from './support/db-state';
import { TENANT_HEADER } from './support/test-app';
import { useTestBroker } from './support/test-broker';

const MAINTENANCE = '/api/v1/system/maintenance';

/**
 * A misspelt key is a 400 naming it (with the key it was likely meant to be), on every route that takes a body or
 * a closed set of query parameters, and the request changes nothing: a typo must never answer success and do nothing.
 */
describe('unknown keys', () => {
  const broker = useTestBroker();

  /** "orders" with leaseTime 30: two messages, the first leased by group g. */
  async function stored(client: BrokerClient): Promise<PopBody> {
    await client.configure({ queue: 'orders', options: { leaseTime: 30 } }).expect(200);
    await client.pushMany('orders', 2);
    return client.popLeased('orders', { consumerGroup: 'g', batch: 1 });
  }

  /** The call answers 400 with exactly this error, and every row of the tenant is as it was. */
  async function refused(call: () => request.Test, error: string): Promise<void> {
    const { client, dataSource } = broker;
    const before = await tenantSnapshot(dataSource, client.tenant);
    const response = await call();
    expect([response.status, response.body]).toEqual([400, { error }]);
    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
  }

  describe('in bodies', () => {
    it('configure: "option" for "options" is a 400 naming it, and the queue keeps its options', async () => {
      const { client } = broker;
      await stored(client);

      await refused(
        () => client.configure({ queue: 'orders', option: { leaseTime: 5 } }),
        'unknown key "option"; did you mean "options"?',
      );
      await refused(
        () => client.configure({ queue: 'orders', options: { leaseTme: 5 } }),
        'options.leaseTme is not a supported option; did you mean "leaseTime"?',
      );
      expect((await client.get('/api/v1/resources/queues/orders')).body.options).toMatchObject({ leaseTime: 30 });
    });

    it('push: at the top and in any item, and no item of the request is stored', async () => {
      const { client } = broker;
      await stored(client);
      const item = { queue: 'orders', payload: 1 };

      await refused(() => client.post('/api/v1/push', { items: [item], queue: 'orders' }), 'unknown key "queue"');
      await refused(
        () => client.push([item, item, item, { queue: 'orders', payloud: 1 }]),
        'items[3]: unknown key "payloud"; did you mean "payload"?',
      );
    });

    it('ack and ack/batch: in the acknowledgment and at the top, and no cursor moves', async () => {
      const { client } = broker;
      const pop = await stored(client);
      const ack = { transactionId: pop.messages[0].transactionId, partitionId: pop.partitionId, leaseId: pop.leaseId };

      await refused(
        () => client.ack({ ...ack, consumerGroup: 'g', stauts: 'failed' }),
        'unknown key "stauts"; did you mean "status"?',
      );
      await refused(
        () => client.ackBatch({ consumerGroups: 'g', acknowledgments: [ack] }),
        'unknown key "consumerGroups"; did you mean "consumerGroup"?',
      );
      await refused(
        () => client.ackBatch({ consumerGroup: 'g', acknowledgments: [{ ...ack, leaseID: pop.leaseId }] }),
        'acknowledgments[0]: unknown key "leaseID"; did you mean "leaseId"?',
      );
    });

    it('transaction: at the top a 400; in an operation or a push item a rollback naming it; nothing applied', async () => {
      const { client, dataSource } = broker;
      const pop = await stored(client);
      const ack = {
        type: 'ack',
        transactionId: pop.messages[0].transactionId,
        partitionId: pop.partitionId,
        consumerGroup: 'g',
      };
      const push = { type: 'push', items: [{ queue: 'out', payload: 1 }] };

      await refused(
        () => client.post('/api/v1/transaction', { operations: [ack, push], requiredLease: [pop.leaseId] }),
        'unknown key "requiredLease"; did you mean "requiredLeases"?',
      );
      const before = await tenantSnapshot(dataSource, client.tenant);
      for (const [operations, error] of [
        [[{ ...ack, leaseEpoc: 1 }, push], 'operations[0]: unknown key "leaseEpoc"; did you mean "leaseEpoch"?'],
        [[ack, { ...push, queue: 'out' }], 'operations[1]: unknown key "queue"'],
        [
          [ack, { type: 'push', items: [{ queue: 'out', payloud: 1 }] }],
          'operations[1].items[0]: unknown key "payloud"; did you mean "payload"?',
        ],
      ] as const) {
        const response = await client.post('/api/v1/transaction', { operations, requiredLeases: [pop.leaseId] });
        expect([response.status, response.body]).toEqual([
          200,
          { transactionId: expect.any(String), success: false, reason: 'bad_request', error, results: [] },
        ]);
      }
      expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
    });

    it('seek: anything but toEnd or timestamp, and no cursor moves', async () => {
      const { client } = broker;
      await stored(client);

      await refused(
        () => client.post('/api/v1/consumer-groups/g/queues/orders/seek', { toEnd: true, partition: 'Default' }),
        'unknown key "partition"',
      );
      await refused(
        () => client.post('/api/v1/consumer-groups/g/queues/orders/partitions/Default/seek', { timestmp: 'x' }),
        'unknown key "timestmp"; did you mean "timestamp"?',
      );
    });

    it('maintenance: anything but enabled, and the switch stays as it was', async () => {
      const { client } = broker;

      await refused(() => client.post(MAINTENANCE, { enabled: true, scope: 'pop' }), 'unknown key "scope"');
      await refused(
        () => client.post(`${MAINTENANCE}/pop`, { enable: true }),
        'unknown key "enable"; did you mean "enabled"?',
      );
      expect((await client.get(MAINTENANCE)).body).toEqual({ maintenanceMode: false, popMaintenanceMode: false });
    });

    it('a route that takes no body: any key in one, and the message is not retried or moved', async () => {
      const { client } = broker;
      const pop = await stored(client);
      const message = `/api/v1/messages/${pop.partitionId}/orders-Default-1`;

      await refused(
        () => client.post(`${message}/dlq`, { consumerGroup: 'g' }),
        'this route takes no request body: unknown key "consumerGroup"',
      );
      await refused(() => client.post(`${message}/retry`, [1]), 'this route takes no request body');
      // What Queen's client sends to retry: an empty object, which says nothing.
      expect((await client.post(`${message}/retry`, {})).status).toBe(404);
    });

    it('names at most three keys, each cut short, whatever the request holds', async () => {
      const { client } = broker;
      const long = 'k'.repeat(200_000);

      await refused(
        () => client.configure({ queue: 'orders', a: 1, b: 2, c: 3, d: 4, e: 5 }),
        'unknown keys "a", "b", "c" and 2 more',
      );
      await refused(() => client.configure({ queue: 'orders', [long]: 1 }), `unknown key "${'k'.repeat(40)}..."`);
    });
  });

  describe('in query strings', () => {
    it('pop: a misspelt parameter is a 400, and nothing is leased', async () => {
      const { client } = broker;
      await stored(client);

      await refused(
        () => client.pop('orders', { batch: 1, wiat: true }),
        'unknown query parameter "wiat"; did you mean "wait"?',
      );
      // Last-value delivery is not implemented: refused, so a client asking for it learns so.
      await refused(() => client.pop('orders', { conflation: true }), 'unknown query parameter "conflation"');
    });

    it('deletes: a parameter mistaken for a filter is a 400, and nothing is deleted', async () => {
      const { client } = broker;
      const pop = await stored(client);

      await refused(
        () => client.delete('/api/v1/resources/queues/orders?partition=Default'),
        'unknown query parameter "partition"',
      );
      await refused(
        () => client.delete(`/api/v1/messages/${pop.partitionId}/orders-Default-1?consumerGroup=g`),
        'unknown query parameter "consumerGroup"',
      );
      await refused(
        () => client.delete('/api/v1/queues/orders/clear?partitions=Default'),
        'unknown query parameter "partitions"; did you mean "partition"?',
      );
      await refused(
        () => client.delete('/api/v1/consumer-groups/g?deleteMetadata=false'),
        "deleteMetadata must be true: a group's starting point is deleted with it",
      );
    });

    it('listings: a misspelt filter is a 400 rather than an unfiltered answer', async () => {
      const { client } = broker;
      await stored(client);

      for (const [path, query, error] of [
        ['/api/v1/dlq', { queue: 'orders', limt: 5 }, 'unknown query parameter "limt"; did you mean "limit"?'],
        ['/api/v1/consumer-groups', { queues: 'orders' }, 'unknown query parameter "queues"; did you mean "queue"?'],
        ['/api/v1/resources/queues', { offset: 10 }, 'unknown query parameter "offset"'],
        [
          '/api/v1/messages',
          { queue: 'orders', stauts: 'pending' },
          'unknown query parameter "stauts"; did you mean "status"?',
        ],
      ] as const) {
        const response = await client.get(path, query);
        expect([path, response.status, response.body]).toEqual([path, 400, { error }]);
      }
    });
  });

  describe("what Queen's clients send is accepted, even where it is not read", () => {
    it('pop with namespace, task and autopilot; DLQ with partition, from and to; delete with deleteMetadata=true', async () => {
      const { client } = broker;
      await stored(client);

      const pop = await client.pop('orders', { batch: 1, namespace: 'billing', task: 'invoices', autopilot: true });
      expect(pop.status).toBe(200);
      const dlq = await client.get('/api/v1/dlq', { queue: 'orders', partition: 'p', from: '2026-01-01', to: 'x' });
      expect([dlq.status, dlq.body]).toEqual([200, { messages: [], total: 0 }]);
      const deleted = await client.delete('/api/v1/consumer-groups/g/queues/orders?deleteMetadata=true');
      expect(deleted.body).toMatchObject({ success: true, deletedPartitions: 1 });
    });

    it('a push item with data beside its payload, as Queen documents its transaction items', async () => {
      const { client } = broker;

      const push = await client.push([{ queue: 'q', payload: { n: 1 }, data: { n: 2 }, traceId: 't' }]);
      expect(push.status).toBe(201);
      const transaction = await client.post('/api/v1/transaction', {
        operations: [{ type: 'push', items: [{ queue: 'q', payload: { n: 3 }, data: { n: 4 } }] }],
      });
      expect(transaction.body.success).toBe(true);
      expect((await client.popLeased('q', { batch: 10 })).messages.map((message) => message.data)).toEqual([
        { n: 1 },
        { n: 3 },
      ]);
    });

    it('extend never answers 400 for its body, unknown keys included', async () => {
      const { client } = broker;
      const pop = await stored(client);

      const response = await client.post(`/api/v1/lease/${pop.leaseId}/extend`, { seconds: 120, foo: 1 });
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ success: true, renewed: 1 });
    });
  });

  it('a route without query parameters of its own still answers with one it ignores', async () => {
    const { client } = broker;
    await stored(client);
    const response = await request(broker.app.getHttpServer())
      .get('/api/v1/resources/queues/orders?_=1712345678')
      .set(TENANT_HEADER, client.tenant);
    expect(response.status).toBe(200);
  });
});
