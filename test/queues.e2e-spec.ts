import { BrokerClient, PopBody } from './support/broker-client';
import { cursors, sql, storedCounts } from './support/db-state';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { QUEEN_QUEUE_DEFAULTS } from './queen/queen-client';
import { expectPayloadsAsSent, SENT_PAYLOADS, sentItems } from './support/sent-payloads';

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

describe('queues: configure, resources, delete and the dead-letter queue', () => {
  const broker = useTestBroker();

  /** Pops one message of the queue and fails it with this error text. */
  async function fail(queue: string, error: string, query: Record<string, string> = {}): Promise<{ dlq: boolean }> {
    const pop: PopBody = (await broker.client.pop(queue, query)).body;
    const response = await broker.client.ack({
      transactionId: pop.messages[0].transactionId,
      partitionId: pop.partitionId,
      leaseId: pop.leaseId,
      consumerGroup: pop.consumerGroup,
      status: 'failed',
      error,
    });
    return response.body[0];
  }

  describe('POST /api/v1/configure', () => {
    it('creates a missing queue and answers 200 echoing every option sent, with the value in force', async () => {
      const response = await broker.client.configure({
        queue: 'orders',
        options: { leaseTime: 30, retryLimit: 5, deadLetterQueue: false },
      });

      expect(response.status).toBe(200);
      expect(Object.keys(response.body)).toEqual(['configured', 'queue', 'options']);
      expect(response.body).toEqual({
        configured: true,
        queue: 'orders',
        options: { leaseTime: 30, retryLimit: 5, deadLetterQueue: false },
      });
      expect((await storedCounts(broker.dataSource, broker.client.tenant)).queues).toBe(1);
    });

    it('changes only the options sent and echoes only those', async () => {
      await broker.client.configure({ queue: 'orders', options: { leaseTime: 30, retryLimit: 5 } });

      const response = await broker.client.configure({ queue: 'orders', options: { retryLimit: 0 } });
      const detail = await broker.client.get('/api/v1/resources/queues/orders');

      expect(response.body.options).toEqual({ retryLimit: 0 });
      expect(detail.body.options).toEqual({ leaseTime: 30, retryLimit: 0, deadLetterQueue: true });
    });

    it('creates a queue with the defaults when no options are sent', async () => {
      const response = await broker.client.configure({ queue: 'plain' });
      const detail = await broker.client.get('/api/v1/resources/queues/plain');

      expect(response.body).toEqual({ configured: true, queue: 'plain', options: {} });
      expect(detail.body.options).toEqual({ leaseTime: 60, retryLimit: 3, deadLetterQueue: true });
    });

    it("accepts the options Queen's client sends with every queue, puts them in force and echoes them", async () => {
      const options = { ...QUEEN_QUEUE_DEFAULTS, ttl: 3600, retryDelay: 1000, dlqAfterMaxRetries: false };

      const response = await broker.client.configure({ queue: 'orders', namespace: null, task: null, options });
      const detail = await broker.client.get('/api/v1/resources/queues/orders');

      expect(response.status).toBe(200);
      expect(response.body.options).toEqual(options);
      expect(detail.body.options).toEqual({
        leaseTime: 300,
        retryLimit: 3,
        deadLetterQueue: true,
        retryDelay: 1000,
        maxSize: 10000,
        retentionSeconds: 0,
        completedRetentionSeconds: 0,
        ttl: 3600,
      });
    });

    it.each([
      [{ visibility: 30 }, 'options.visibility is not a supported option'],
      [{ encryptionEnabled: 'yes' }, 'options.encryptionEnabled must be true or false'],
      [{ ttl: -1 }, 'options.ttl must be an integer between 0 and 2147483647'],
      [{ retryDelay: '5s' }, 'options.retryDelay must be an integer between 0 and 2147483647'],
      [{ priority: 1.5 }, 'options.priority must be an integer between -2147483647 and 2147483647'],
      [{ leaseTime: 30, 'a b': 1 }, 'options contain an option name that is not supported'],
      [{ constructor: 1 }, 'options.constructor is not a supported option'],
    ])('refuses %j by name and changes nothing', async (options, error) => {
      await broker.client.configure({ queue: 'orders', options: { leaseTime: 45 } }).expect(200);

      const response = await broker.client.configure({ queue: 'orders', options });

      expect([response.status, response.body]).toEqual([400, { error }]);
      const detail = await broker.client.get('/api/v1/resources/queues/orders');
      expect(detail.body.options).toEqual({ leaseTime: 45, retryLimit: 3, deadLetterQueue: true });
    });

    it('stores delayedProcessing and windowBuffer, shows them once set, and echoes them', async () => {
      const response = await broker.client
        .configure({ queue: 'orders', options: { delayedProcessing: 5, windowBuffer: 2 } })
        .expect(200);
      expect(response.body.options).toEqual({ delayedProcessing: 5, windowBuffer: 2 });

      const detail = await broker.client.get('/api/v1/resources/queues/orders');
      expect(detail.body.options).toMatchObject({ delayedProcessing: 5, windowBuffer: 2 });
      const bad = await broker.client.configure({ queue: 'orders', options: { delayedProcessing: -1 } });
      expect(bad.body).toEqual({ error: 'options.delayedProcessing must be an integer between 0 and 2147483647' });
    });

    it('makes leaseTime the default lease of a pop', async () => {
      await broker.client.configure({ queue: 'orders', options: { leaseTime: 5 } });
      await broker.client.pushMany('orders', 1);

      const pop = await broker.client.pop('orders');
      const [{ left }] = await sql(
        broker.dataSource,
        'SELECT extract(epoch FROM lease_expires_at - now())::float AS left FROM consumers WHERE tenant_id = $1 AND lease_id = $2',
        [broker.client.tenant, pop.body.leaseId],
      );

      expect(left).toBeGreaterThan(3);
      expect(left).toBeLessThanOrEqual(5);
    });

    it('applies retryLimit: with 0 the first failure dead-letters the message', async () => {
      await broker.client.configure({ queue: 'orders', options: { retryLimit: 0 } });
      await broker.client.pushMany('orders', 2);

      const result = await fail('orders', 'first and last');

      expect(result).toMatchObject({ dlq: true });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'orders'))[0].committedOffset).toBe(1);
    });

    it('with deadLetterQueue false drops a message that used up its retries instead of keeping it', async () => {
      await broker.client.configure({ queue: 'orders', options: { retryLimit: 0, deadLetterQueue: false } });
      await broker.client.pushMany('orders', 2);

      const result = await fail('orders', 'gone');

      expect(result).toMatchObject({ dlq: false });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'orders'))[0].committedOffset).toBe(1);
      expect((await storedCounts(broker.dataSource, broker.client.tenant)).dead_letters).toBe(0);
      expect((await broker.client.pop('orders')).body.messages[0].transactionId).toBe('orders-Default-1');
    });
  });

  describe('GET /api/v1/resources/queues[/:queue]', () => {
    it("lists the tenant's queues by name with options and counts, and none of another tenant's", async () => {
      await broker.client.pushMany('orders', 3, 'a');
      await broker.client.pushMany('orders', 2, 'b');
      await broker.client.configure({ queue: 'audit', options: { leaseTime: 10 } });
      await new BrokerClient(broker.app, newTenant()).pushMany('foreign', 1);

      const response = await broker.client.get('/api/v1/resources/queues');

      expect(response.status).toBe(200);
      expect(response.body.queues.map((queue: { name: string }) => queue.name)).toEqual(['audit', 'orders']);
      expect(response.body.queues[1]).toEqual({
        name: 'orders',
        options: { leaseTime: 60, retryLimit: 3, deadLetterQueue: true },
        retention: {
          completedRetentionSeconds: 3600,
          retentionEnabled: true,
          retentionSeconds: 1_209_600,
          maxWaitTimeSeconds: 0,
          maxSize: 0,
          dlqRetentionSeconds: 1_209_600,
          ttl: 0,
        },
        namespace: null,
        task: null,
        partitionCount: 2,
        messages: 5,
        pending: 5,
        retained: 5,
        deadLetters: 0,
        consumerGroupCount: 0,
        createdAt: expect.stringMatching(TIMESTAMP),
        updatedAt: expect.stringMatching(TIMESTAMP),
      });
    });

    it('answers {"queues": [], "next": null, "retentionLagSeconds": 0} for a tenant with no queues', async () => {
      const response = await broker.client.get('/api/v1/resources/queues');

      expect(response.status).toBe(200);
      expect(response.body).toEqual({ queues: [], next: null, retentionLagSeconds: 0 });
    });

    it('lists queues by name in pages: limit, then after the name it gives as next', async () => {
      for (const queue of ['c', 'a', 'b']) await broker.client.configure({ queue });

      const first = await broker.client.get('/api/v1/resources/queues', { limit: 2 });
      const rest = await broker.client.get('/api/v1/resources/queues', { limit: 2, after: first.body.next });

      expect(first.body.queues.map((queue: { name: string }) => queue.name)).toEqual(['a', 'b']);
      expect(first.body.next).toBe('b');
      expect(rest.body.queues.map((queue: { name: string }) => queue.name)).toEqual(['c']);
      expect(rest.body.next).toBeNull();
    });

    it('details partitions and, per consumer group, cursors, lag and live leases without revealing lease ids', async () => {
      await broker.client.pushMany('orders', 3, 'a');
      await broker.client.pushMany('orders', 1, 'b');
      const pop: PopBody = (await broker.client.pop('orders', { batch: 2 }, 'a')).body;
      await broker.client.ack({
        transactionId: pop.messages[0].transactionId,
        partitionId: pop.partitionId,
        leaseId: pop.leaseId,
      });
      await broker.client.pop('orders', { consumerGroup: 'audit', autoAck: true, partitions: 2, batch: 10 });

      const response = await broker.client.get('/api/v1/resources/queues/orders');

      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ name: 'orders', partitionCount: 2, messages: 4, consumerGroupCount: 2 });
      expect(response.body.partitions).toEqual([
        { id: expect.any(String), name: 'a', messages: 3, createdAt: expect.stringMatching(TIMESTAMP) },
        { id: expect.any(String), name: 'b', messages: 1, createdAt: expect.stringMatching(TIMESTAMP) },
      ]);
      const [queueMode, audit] = response.body.consumerGroups;
      expect(queueMode).toMatchObject({ name: '__QUEUE_MODE__', subscriptionFrom: null, lag: 3, liveLeases: 1 });
      expect(queueMode.partitions).toEqual([
        {
          partitionId: pop.partitionId,
          partition: 'a',
          committedOffset: 1,
          lag: 2,
          leased: true,
          leaseExpiresAt: expect.stringMatching(TIMESTAMP),
          retryCount: 0,
          deliveryAttempt: 1,
        },
        expect.objectContaining({ partition: 'b', committedOffset: 0, lag: 1, leased: false, leaseExpiresAt: null }),
      ]);
      expect(audit).toMatchObject({ name: 'audit', lag: 0, liveLeases: 0 });
      expect(JSON.stringify(response.body)).not.toContain(pop.leaseId);
    });

    it("answers 404 for an unknown queue and for another tenant's", async () => {
      await new BrokerClient(broker.app, newTenant()).pushMany('foreign', 1);

      for (const queue of ['nope', 'foreign']) {
        const response = await broker.client.get(`/api/v1/resources/queues/${queue}`);
        expect(response.status).toBe(404);
        expect(response.body).toEqual({ error: 'queue not found' });
      }
    });
  });

  describe('DELETE /api/v1/resources/queues/:queue', () => {
    it('deletes the queue with its messages, cursors and leases, and answers 200 deleted true, existed true', async () => {
      await broker.client.pushMany('orders', 2);
      const pop: PopBody = (await broker.client.pop('orders')).body;

      const response = await broker.client.delete('/api/v1/resources/queues/orders');

      expect(response.status).toBe(200);
      expect(response.body).toEqual({ deleted: true, queue: 'orders', existed: true });
      expect(await storedCounts(broker.dataSource, broker.client.tenant)).toEqual({
        queues: 0,
        partitions: 0,
        messages: 0,
        consumer_groups: 0,
        consumers: 0,
        dead_letters: 0,
      });
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 0 });
      expect((await broker.client.pop('orders')).status).toBe(204);
      expect((await broker.client.get('/api/v1/resources/queues/orders')).status).toBe(404);
    });

    it('is idempotent: a missing queue answers 200 deleted false, existed false', async () => {
      await broker.client.pushMany('orders', 1);
      await broker.client.delete('/api/v1/resources/queues/orders');

      const again = await broker.client.delete('/api/v1/resources/queues/orders');

      expect(again.status).toBe(200);
      expect(again.body).toEqual({ deleted: false, queue: 'orders', existed: false });
    });

    it("leaves another tenant's queue of the same name alone", async () => {
      const owner = new BrokerClient(broker.app, newTenant());
      await owner.pushMany('orders', 1);

      const response = await broker.client.delete('/api/v1/resources/queues/orders');

      expect(response.body).toEqual({ deleted: false, queue: 'orders', existed: false });
      expect((await storedCounts(broker.dataSource, owner.tenant)).messages).toBe(1);
    });

    it('lets a push create the queue afresh after deletion, with offsets from 1', async () => {
      await broker.client.pushMany('orders', 3);
      await broker.client.delete('/api/v1/resources/queues/orders');

      await broker.client.pushMany('orders', 1, undefined, 'again');
      const pop = await broker.client.pop('orders');

      expect(pop.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual(['again-0']);
      expect((await cursors(broker.dataSource, broker.client.tenant, 'orders'))[0].leaseEndOffset).toBe(1);
    });
  });

  describe('GET /api/v1/dlq', () => {
    /** Pushes count messages to a queue with retryLimit 0 and fails each one in queue mode. */
    async function deadLetter(queue: string, count: number): Promise<void> {
      await broker.client.configure({ queue, options: { retryLimit: 0 } });
      await broker.client.pushMany(queue, count, undefined, `${queue}-q`);
      for (let n = 0; n < count; n++) {
        await fail(queue, `error ${n}`);
      }
    }

    it('answers the dead letters, oldest first, with data, errorMessage and the total', async () => {
      await deadLetter('orders', 2);

      const response = await broker.client.get('/api/v1/dlq', { queue: 'orders' });

      expect(response.status).toBe(200);
      expect(Object.keys(response.body)).toEqual(['messages', 'total']);
      expect(response.body.total).toBe(2);
      expect(response.body.messages[0]).toEqual({
        id: expect.any(String),
        messageId: expect.any(String),
        transactionId: 'orders-q-0',
        traceId: null,
        data: { n: 0 },
        producerSub: null,
        errorMessage: 'error 0',
        retryCount: 0,
        queue: 'orders',
        partition: 'Default',
        partitionId: expect.any(String),
        consumerGroup: '__QUEUE_MODE__',
        createdAt: expect.stringMatching(TIMESTAMP),
        failedAt: expect.stringMatching(TIMESTAMP),
      });
      expect(response.body.messages[1]).toMatchObject({ transactionId: 'orders-q-1', errorMessage: 'error 1' });
    });

    it('answers each payload as it was pushed, minified, after a failed ack dead-lettered it', async () => {
      await broker.client.configure({ queue: 'texts', options: { retryLimit: 0 } }).expect(200);
      await broker.client.postText('/api/v1/push', `{"items": ${sentItems('texts', 'p')}}`).expect(201);
      for (let n = 0; n < SENT_PAYLOADS.length; n += 1) {
        expect(await fail('texts', 'unreadable')).toMatchObject({ dlq: true });
      }

      const response = await broker.client.get('/api/v1/dlq', { queue: 'texts', limit: 100 });

      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
      expectPayloadsAsSent(response.text, 'p');
      expect(response.body.total).toBe(SENT_PAYLOADS.length);
      expect(Object.keys(response.body.messages[0])).toEqual([
        'id',
        'messageId',
        'transactionId',
        'traceId',
        'data',
        'producerSub',
        'errorMessage',
        'retryCount',
        'queue',
        'partition',
        'partitionId',
        'consumerGroup',
        'createdAt',
        'failedAt',
      ]);
    });

    it('filters by queue and consumer group and pages with limit and offset, total counting every match', async () => {
      await deadLetter('orders', 3);
      await fail('orders', 'billing failed', { consumerGroup: 'billing' });
      await deadLetter('audit', 1);

      const all = await broker.client.get('/api/v1/dlq');
      const page = await broker.client.get('/api/v1/dlq', {
        queue: 'orders',
        consumerGroup: '__QUEUE_MODE__',
        limit: 2,
        offset: 1,
      });
      const billing = await broker.client.get('/api/v1/dlq', { consumerGroup: 'billing' });
      const beyond = await broker.client.get('/api/v1/dlq', { offset: 100 });

      expect(all.body.total).toBe(5);
      expect(page.body.total).toBe(3);
      expect(page.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
        'orders-q-1',
        'orders-q-2',
      ]);
      expect(billing.body.messages).toMatchObject([
        { transactionId: 'orders-q-0', consumerGroup: 'billing', errorMessage: 'billing failed' },
      ]);
      expect(beyond.body).toEqual({ messages: [], total: 5 });
    });

    it("answers 404 for an unknown queue and never shows another tenant's dead letters", async () => {
      await deadLetter('orders', 1);
      const stranger = new BrokerClient(broker.app, newTenant());

      const unknown = await stranger.get('/api/v1/dlq', { queue: 'orders' });
      const everything = await stranger.get('/api/v1/dlq');

      expect(unknown.status).toBe(404);
      expect(unknown.body).toEqual({ error: 'queue not found' });
      expect(everything.body).toEqual({ messages: [], total: 0 });
    });
  });
});
