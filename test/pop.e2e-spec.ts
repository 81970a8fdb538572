import request from 'supertest';
import { BrokerClient, PopBody } from './support/broker-client';
import { cursors, leaseSecondsLeft, sql } from './support/db-state';
import { sleep } from './support/sleep';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { MESSAGE_KEYS } from './support/contract-keys';
import { expectPayloadsAsSent, sentItems } from './support/sent-payloads';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const POP_KEYS = [
  'success',
  'queue',
  'partition',
  'partitionId',
  'leaseId',
  'consumerGroup',
  'messages',
  'partitionsClaimed',
  'claimedPartitions',
];

const transactionIds = (body: PopBody): string[] => body.messages.map((message) => message.transactionId);

describe('GET /api/v1/pop/queue/:queue[/partition/:partition]', () => {
  const broker = useTestBroker();

  const stored = () =>
    sql(
      broker.dataSource,
      `SELECT (SELECT count(*) FROM queues WHERE tenant_id = $1)::int AS queues,
              (SELECT count(*) FROM partitions WHERE tenant_id = $1)::int AS partitions,
              (SELECT count(*) FROM consumer_groups WHERE tenant_id = $1)::int AS groups,
              (SELECT count(*) FROM consumers WHERE tenant_id = $1)::int AS consumers`,
      [broker.client.tenant],
    );

  describe('a pop that finds messages', () => {
    it('gives createdAt and the lease expiry to the microsecond, not milliseconds padded with zeros', async () => {
      const times: string[] = [];
      for (let round = 0; round < 10; round += 1) {
        const body = await broker.client.pushAndPop(`precise-${round}`, 2);
        times.push(...body.messages.map((message) => message.createdAt));
        const extended = await broker.client.post(`/api/v1/lease/${body.leaseId}/extend`, { seconds: 60 });
        times.push(extended.body.newExpiresAt as string);
      }
      for (const time of times) expect(time).toMatch(TIMESTAMP);
      // A real microsecond reading ends in 000 one time in a thousand.
      expect(times.filter((time) => !time.endsWith('000Z')).length).toBeGreaterThan(times.length / 2);
    });

    it('returns 200 with every contract key in order and a fresh UUIDv7 lease shared by its messages', async () => {
      const [pushed] = (
        await broker.client.push([{ queue: 'orders', payload: { n: 1 }, transactionId: 't1', traceId: 'tr' }])
      ).body;

      const response = await broker.client.pop('orders');

      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      const body: PopBody = response.body;
      expect(Object.keys(body)).toEqual(POP_KEYS);
      expect(body).toMatchObject({
        success: true,
        queue: 'orders',
        partition: 'Default',
        consumerGroup: '__QUEUE_MODE__',
        partitionsClaimed: 1,
      });
      expect(body.leaseId).toMatch(UUID_V7);
      expect(Object.keys(body.messages[0])).toEqual(MESSAGE_KEYS);
      expect(body.messages[0]).toEqual({
        id: pushed.message_id,
        transactionId: 't1',
        traceId: 'tr',
        data: { n: 1 },
        producerSub: null,
        createdAt: expect.stringMatching(TIMESTAMP),
        partitionId: body.partitionId,
        partition: 'Default',
        leaseId: body.leaseId,
        consumerGroup: '__QUEUE_MODE__',
        deliveryAttempt: 1,
        leaseEpoch: 1,
      });
      expect(body.claimedPartitions).toEqual([
        { partitionId: body.partitionId, partition: 'Default', leaseEpoch: 1, messages: 1 },
      ]);
    });

    it('answers each payload as it was pushed, minified, on the queue, the partition and the discovery route', async () => {
      const { client } = broker;
      await client.configure({ queue: 'texts', namespace: 'shop' }).expect(200);
      await client.postText('/api/v1/push', `{"items": ${sentItems('texts', 'p')}}`).expect(201);

      const answers = [
        await client.pop('texts', { consumerGroup: 'by-queue', batch: 100 }),
        await client.pop('texts', { consumerGroup: 'by-partition', batch: 100 }, 'Default'),
        await client.get('/api/v1/pop', { namespace: 'shop', consumerGroup: 'by-namespace', batch: 100 }),
      ];

      for (const answer of answers) {
        expect(answer.status).toBe(200);
        expectPayloadsAsSent(answer.text, 'p');
      }
    });

    it('delivers a partition in offset order, batch by batch', async () => {
      await broker.client.pushMany('orders', 5);

      const first = await broker.client.pop('orders', { batch: 2 });
      await broker.client.ackAll(first.body);
      const second = await broker.client.pop('orders', { batch: 2 });
      await broker.client.ackAll(second.body);
      const third = await broker.client.pop('orders', { batch: 2 });

      expect([first, second, third].map((response) => transactionIds(response.body))).toEqual([
        ['orders-Default-0', 'orders-Default-1'],
        ['orders-Default-2', 'orders-Default-3'],
        ['orders-Default-4'],
      ]);
    });

    it('mints one lease for every partition it claims, renewed by one extend with renewed equal to partitionsClaimed', async () => {
      for (const partition of ['a', 'b', 'c']) await broker.client.pushMany('orders', 2, partition);

      const pop = await broker.client.pop('orders', { partitions: 3, batch: 100 });

      expect(pop.body.partitionsClaimed).toBe(3);
      expect(new Set(pop.body.messages.map((message: { leaseId: string }) => message.leaseId))).toEqual(
        new Set([pop.body.leaseId]),
      );
      const rows = await cursors(broker.dataSource, broker.client.tenant, 'orders');
      expect(rows.map((row) => row.leaseId)).toEqual([pop.body.leaseId, pop.body.leaseId, pop.body.leaseId]);
      expect(rows.map((row) => row.leaseEndOffset)).toEqual([2, 2, 2]);
      const extend = await broker.client.extend(pop.body.leaseId, 120);
      expect(extend.body).toMatchObject({ success: true, renewed: 3 });
      // partition and partitionId describe the first claimed partition; each message names its own.
      expect(pop.body.messages[0]).toMatchObject({ partition: pop.body.partition, partitionId: pop.body.partitionId });
    });

    it('counts batch across all claimed partitions and claims no partition it hands nothing from', async () => {
      for (const partition of ['a', 'b', 'c']) await broker.client.pushMany('orders', 3, partition);

      const pop = await broker.client.pop('orders', { partitions: 3, batch: 4 });

      expect(pop.body.messages).toHaveLength(4);
      expect(pop.body.partitionsClaimed).toBe(2);
      const leased = (await cursors(broker.dataSource, broker.client.tenant, 'orders')).filter((row) => row.leaseLive);
      expect(leased.map((row) => row.leaseEndOffset).sort()).toEqual([1, 3]);
    });

    it('claims one partition by default, leaving the others to other consumers', async () => {
      await broker.client.pushMany('orders', 1, 'a');
      await broker.client.pushMany('orders', 1, 'b');

      const first = await broker.client.pop('orders');
      const second = await broker.client.pop('orders');
      const third = await broker.client.pop('orders');

      expect(first.body.partitionsClaimed).toBe(1);
      expect(second.body.partitionsClaimed).toBe(1);
      expect(new Set([first.body.partition, second.body.partition])).toEqual(new Set(['a', 'b']));
      expect(third.status).toBe(204);
    });

    it('pops only the named partition on the partition route', async () => {
      await broker.client.pushMany('orders', 2, 'a');
      await broker.client.pushMany('orders', 2, 'b');

      const response = await broker.client.pop('orders', { batch: 10 }, 'b');

      expect(response.status).toBe(200);
      expect(response.body.partition).toBe('b');
      expect(transactionIds(response.body)).toEqual(['orders-b-0', 'orders-b-1']);
      expect((await broker.client.pop('orders', {}, 'b')).status).toBe(204);
    });

    it('leases for the queue leaseTime (60 s) by default and for leaseSeconds when given, by the database clock', async () => {
      await broker.client.pushMany('orders', 1, 'a');
      await broker.client.pushMany('orders', 1, 'b');

      const byDefault = await broker.client.pop('orders', {}, 'a');
      const explicit = await broker.client.pop('orders', { leaseSeconds: 7 }, 'b');

      const [defaultLeft] = await leaseSecondsLeft(broker.dataSource, broker.client.tenant, byDefault.body.leaseId);
      const [explicitLeft] = await leaseSecondsLeft(broker.dataSource, broker.client.tenant, explicit.body.leaseId);
      expect(defaultLeft).toBeGreaterThan(55);
      expect(defaultLeft).toBeLessThanOrEqual(60);
      expect(explicitLeft).toBeGreaterThan(4);
      expect(explicitLeft).toBeLessThanOrEqual(7);
    });
  });

  describe('nothing to deliver', () => {
    it('answers a bare 204 with no body and no content-type for an empty queue', async () => {
      await broker.client.configure({ queue: 'orders' });

      const response = await broker.client.pop('orders');

      expect(response.status).toBe(204);
      expect(response.text).toBe('');
      expect(response.headers['content-type']).toBeUndefined();
      expect(response.headers['content-length']).toBeUndefined();
    });

    it('answers 204 to a second consumer of the group while the partition is leased: one live lease per partition and group', async () => {
      await broker.client.pushMany('orders', 3);
      const holder = await broker.client.pop('orders', { batch: 1 });

      const rival = await broker.client.pop('orders');

      expect(holder.status).toBe(200);
      expect(rival.status).toBe(204);
      expect(
        (await cursors(broker.dataSource, broker.client.tenant, 'orders')).filter((row) => row.leaseLive),
      ).toHaveLength(1);
    });

    it.each([
      ['an unknown queue', 'nope', undefined],
      ['an unknown partition', 'orders', 'nope'],
    ])(
      'answers a bare 204 for %s and creates nothing, as the Queen reference has it',
      async (_case, queue, partition) => {
        await broker.client.pushMany('orders', 1);
        const before = await stored();

        const response = await broker.client.pop(queue, {}, partition);

        expect(response.status).toBe(204);
        expect(response.text).toBe('');
        expect(await stored()).toEqual(before);
      },
    );

    it("answers 204 for another tenant's queue and partition, exactly as for unknown ones, and leaves its messages alone", async () => {
      const owner = new BrokerClient(broker.app, newTenant());
      await owner.pushMany('private', 1, 'p');

      const queue = await broker.client.pop('private');
      const partition = await broker.client.pop('private', {}, 'p');

      expect(queue.status).toBe(204);
      expect(partition.status).toBe(204);
      expect((await owner.pop('private')).body.messages[0].deliveryAttempt).toBe(1);
    });
  });

  // A pop claims on what it saw of its queue, group and cursor at its last pop, held to it by the claim itself.
  describe('a queue popped before', () => {
    /** Pushes one message with a transaction id of its own (`tag`) and pops; the pop's answer. */
    const pushThenPop = async (queue: string, tag: string, query = {}, partition?: string) => {
      await broker.client.pushMany(queue, 1, partition, `${queue}-${tag}`);
      return broker.client.pop(queue, query, partition);
    };
    const popped = async (...args: Parameters<typeof pushThenPop>): Promise<PopBody> => {
      const answer = await pushThenPop(...args);
      expect(answer.status).toBe(200);
      return answer.body as PopBody;
    };
    /** Twice a message popped and acked, so that the broker has seen the queue's group and cursor ready. */
    const popTwice = async (queue: string, query = {}, partition?: string) => {
      for (const tag of ['seen-1', 'seen-2']) {
        await broker.client.ackAll(await popped(queue, tag, query, partition)).expect(200);
      }
    };
    const secondsLeft = async (body: PopBody) =>
      (await leaseSecondsLeft(broker.dataSource, broker.client.tenant, body.leaseId!))[0];

    it('leases for the lease time configured since, through this broker or straight in the database', async () => {
      await broker.client.configure({ queue: 'known', options: { leaseTime: 30 } }).expect(200);
      await popTwice('known');

      await broker.client.configure({ queue: 'known', options: { leaseTime: 600 } }).expect(200);
      const configured = await popped('known', 'configured');
      await broker.client.ackAll(configured).expect(200);
      // Another broker's configure: nothing in this one hears of it.
      await sql(broker.dataSource, `UPDATE queues SET lease_time = 120 WHERE tenant_id = $1 AND name = 'known'`, [
        broker.client.tenant,
      ]);
      const elsewhere = await popped('known', 'elsewhere');

      expect(configured.messages).toHaveLength(1);
      const left = await secondsLeft(elsewhere);
      expect(left).toBeGreaterThan(60);
      expect(left).toBeLessThanOrEqual(120);
    });

    it('holds back messages newer than a windowBuffer configured since', async () => {
      await popTwice('windowed');
      await broker.client.configure({ queue: 'windowed', options: { windowBuffer: 3600 } }).expect(200);

      expect((await pushThenPop('windowed', 'fresh')).status).toBe(204);
    });

    it('finds the queue deleted and made again under its name, and its new messages', async () => {
      await popTwice('remade');
      await broker.client.delete('/api/v1/resources/queues/remade').expect(200);

      expect(transactionIds(await popped('remade', 'again'))).toEqual(['remade-again-0']);
    });

    it("pops a named partition again after the group's cursors there were deleted", async () => {
      await popTwice('grouped', { consumerGroup: 'g' }, 'p1');
      await broker.client.delete('/api/v1/consumer-groups/g/queues/grouped').expect(200);

      const answer = await popped('grouped', 'again', { consumerGroup: 'g' }, 'p1');

      // Its cursors gone, the group starts again from the partition's first message.
      expect(transactionIds(answer)).toEqual(['grouped-seen-1-0', 'grouped-seen-2-0', 'grouped-again-0']);
    });
  });

  describe('HEAD', () => {
    it.each([
      ['the queue route', '/api/v1/pop/queue/orders'],
      ['the partition route', '/api/v1/pop/queue/orders/partition/Default'],
      ['the queue route in upper case', '/API/V1/POP/QUEUE/orders'],
      ['the partition route in mixed case', '/Api/V1/Pop/Queue/orders/Partition/Default'],
      ['the queue route with a trailing slash', '/api/v1/pop/queue/orders/'],
    ])('answers 405 on %s and leases nothing: a HEAD answer carries no lease id to work under', async (_case, path) => {
      await broker.client.pushMany('orders', 2);
      const before = await cursors(broker.dataSource, broker.client.tenant, 'orders');

      const head = await request(broker.app.getHttpServer()).head(path).set(TENANT_HEADER, broker.client.tenant);

      expect(head.status).toBe(405);
      expect(head.headers.allow).toBe('GET');
      expect(await cursors(broker.dataSource, broker.client.tenant, 'orders')).toEqual(before);
      const pop = await broker.client.pop('orders');
      expect(pop.status).toBe(200);
      expect(pop.body.messages.map((message: { deliveryAttempt: number }) => message.deliveryAttempt)).toEqual([1, 1]);
    });
  });

  describe('consumer groups', () => {
    it('delivers every message to each group, in order, with a cursor per group', async () => {
      await broker.client.pushMany('events', 3);

      const a = await broker.client.pop('events', { consumerGroup: 'billing', batch: 10 });
      const b = await broker.client.pop('events', { consumerGroup: 'shipping', batch: 10 });
      const queueMode = await broker.client.pop('events', { batch: 10 });

      for (const response of [a, b, queueMode]) {
        expect(transactionIds(response.body)).toEqual(['events-Default-0', 'events-Default-1', 'events-Default-2']);
      }
      expect(a.body.consumerGroup).toBe('billing');
      expect(a.body.messages[0].consumerGroup).toBe('billing');
      expect(new Set([a.body.leaseId, b.body.leaseId, queueMode.body.leaseId]).size).toBe(3);
      const groups = (await cursors(broker.dataSource, broker.client.tenant, 'events')).map((row) => row.consumerGroup);
      expect(groups).toEqual(['__QUEUE_MODE__', 'billing', 'shipping']);
    });

    it.each(['new', 'new-only', 'now'])(
      'with subscriptionMode %s starts the group at its first pop, even one that returns 204, and later pops never move it',
      async (mode) => {
        await broker.client.pushMany('events', 2, undefined, 'before');

        const first = await broker.client.pop('events', { consumerGroup: 'late', subscriptionMode: mode });
        await broker.client.pushMany('events', 1, undefined, 'after');
        const second = await broker.client.pop('events', { consumerGroup: 'late', subscriptionMode: 'all', batch: 10 });

        expect(first.status).toBe(204);
        expect(transactionIds(second.body)).toEqual(['after-0']);
      },
    );

    it.each(['all', 'from_beginning'])(
      'with subscriptionMode %s starts a new group at the first message',
      async (mode) => {
        await broker.client.pushMany('events', 2);

        const response = await broker.client.pop('events', {
          consumerGroup: 'replay',
          subscriptionMode: mode,
          batch: 10,
        });

        expect(transactionIds(response.body)).toEqual(['events-Default-0', 'events-Default-1']);
      },
    );

    it('with subscriptionFrom starts a new group at the first message created at or after that instant', async () => {
      await broker.client.pushMany('events', 1, undefined, 'old');
      await sleep(5);
      await broker.client.pushMany('events', 2, undefined, 'recent');
      const [{ created_at: from }] = await sql(
        broker.dataSource,
        `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at
           FROM messages WHERE tenant_id = $1 AND transaction_id = 'recent-0'`,
        [broker.client.tenant],
      );

      const response = await broker.client.pop('events', { consumerGroup: 'audit', subscriptionFrom: from, batch: 10 });

      expect(transactionIds(response.body)).toEqual(['recent-0', 'recent-1']);
    });

    it.each(['now', 'NOW'])(
      'with subscriptionFrom=%s starts the group at its first pop, as subscriptionMode=new does (what Queen clients send)',
      async (from) => {
        await broker.client.pushMany('events', 2, undefined, 'before');

        const first = await broker.client.pop('events', { consumerGroup: 'late', subscriptionFrom: from });
        await broker.client.pushMany('events', 1, undefined, 'after');
        const second = await broker.client.pop('events', { consumerGroup: 'late', batch: 10 });

        expect(first.status).toBe(204);
        expect(transactionIds(second.body)).toEqual(['after-0']);
      },
    );

    it('applies a group starting point to partitions created after the group', async () => {
      await broker.client.pushMany('events', 1, 'a');
      await broker.client.pop('events', { consumerGroup: 'late', subscriptionMode: 'new' });
      await broker.client.pushMany('events', 1, 'b');

      const response = await broker.client.pop('events', { consumerGroup: 'late', partitions: 2, batch: 10 });

      expect(transactionIds(response.body)).toEqual(['events-b-0']);
    });
  });

  describe('autoAck', () => {
    it('delivers and commits at once: leaseId null, no live lease, nothing redelivered', async () => {
      await broker.client.pushMany('orders', 2);

      const response = await broker.client.pop('orders', { autoAck: true, batch: 10 });

      expect(response.status).toBe(200);
      expect(response.body.leaseId).toBeNull();
      expect(response.body.messages.map((message: { leaseId: null }) => message.leaseId)).toEqual([null, null]);
      expect(await cursors(broker.dataSource, broker.client.tenant, 'orders')).toMatchObject([
        { committedOffset: 2, leaseId: null, leaseEndOffset: null, hasExpiry: false },
      ]);
      expect((await broker.client.pop('orders')).status).toBe(204);
    });
  });

  describe('long poll (wait=true)', () => {
    it('parks and answers 200 as soon as a push arrives, long before the timeout', async () => {
      await broker.client.configure({ queue: 'orders' });
      const started = Date.now();

      const parked = broker.client.pop('orders', { wait: true, timeout: 10_000 }).then((response) => response);
      await sleep(300);
      await broker.client.pushMany('orders', 1, undefined, 'late');
      const response = await parked;

      expect(response.status).toBe(200);
      expect(transactionIds(response.body)).toEqual(['late-0']);
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('answers a bare 204 at the timeout when nothing arrives, and a push to another queue does not end it early', async () => {
      await broker.client.configure({ queue: 'orders' });
      const started = Date.now();

      const parked = broker.client.pop('orders', { wait: true, timeout: 600 }).then((response) => response);
      await sleep(100);
      await broker.client.pushMany('elsewhere', 1);
      const response = await parked;

      expect(response.status).toBe(204);
      expect(response.text).toBe('');
      expect(Date.now() - started).toBeGreaterThanOrEqual(590);
    });

    it('on the partition route ignores pushes to other partitions and wakes for its own', async () => {
      await broker.client.pushMany('orders', 1, 'mine', 'seed');
      await broker.client.ackAll((await broker.client.pop('orders', {}, 'mine')).body);

      const parked = broker.client.pop('orders', { wait: true, timeout: 10_000 }, 'mine').then((response) => response);
      await sleep(200);
      await broker.client.pushMany('orders', 1, 'other');
      await sleep(200);
      await broker.client.pushMany('orders', 1, 'mine', 'wanted');
      const response = await parked;

      expect(response.status).toBe(200);
      expect(response.body.partition).toBe('mine');
      expect(transactionIds(response.body)).toEqual(['wanted-0']);
    });

    it('answers at once when messages are already there', async () => {
      await broker.client.pushMany('orders', 1);
      const started = Date.now();

      const response = await broker.client.pop('orders', { wait: true, timeout: 10_000 });

      expect(response.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2_000);
    });

    it('stops waiting when the caller hangs up, so a later push is not leased to nobody', async () => {
      await broker.client.configure({ queue: 'orders' });

      const wakeup = broker.app.get(ParkedPolls);
      const hangingUp = broker.client.pop('orders', { wait: true, timeout: 10_000 });
      const outcome = hangingUp.then(
        () => 'answered',
        () => 'hung up',
      );
      await waitFor(() => wakeup.total === 1, 'the poll parking');
      hangingUp.abort();
      await waitFor(() => wakeup.total === 0, 'the broker letting the poll go');
      await broker.client.pushMany('orders', 1);

      const response = await broker.client.pop('orders');
      expect(response.status).toBe(200);
      expect(response.body.messages[0].deliveryAttempt).toBe(1);
      expect(await Promise.race([outcome, Promise.resolve('pending')])).not.toBe('answered');
    });
  });
});

describe('long polls at application shutdown', () => {
  it('answer 503 shutting down at once, with Retry-After and Connection: close, so clients go elsewhere instead of polling again', async () => {
    const app = await createTestApp();
    const client = new BrokerClient(app, newTenant());
    await client.configure({ queue: 'orders' });
    const parked = Array.from({ length: 3 }, () =>
      client.pop('orders', { wait: true, timeout: 20_000 }).then((response) => response),
    );
    await sleep(300);

    const started = Date.now();
    await app.close();
    const responses = await Promise.all(parked);

    for (const response of responses) {
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ error: 'shutting down' });
      expect(response.headers['retry-after']).toBe('1');
      expect(response.headers.connection).toBe('close');
    }
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
