import { NestExpressApplication } from '@nestjs/platform-express';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, cursors, storedCounts } from './support/db-state';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { openSession } from './support/pg-session';
import { useTestBroker } from './support/test-broker';
import { waitFor, waitForLockWaiter, within } from './support/wait';
import { MESSAGE_KEYS } from './support/contract-keys';
import { expectPayloadsAsSent, SENT_PAYLOADS, sentItems, storedAs } from './support/sent-payloads';

const ids = (messages: Array<{ transactionId: string }>) => messages.map((message) => message.transactionId);
const list = (client: BrokerClient, query: Record<string, string | number>) => client.get('/api/v1/messages', query);

/** Every entry of the listing, following next. */
async function everyPage(client: BrokerClient, query: Record<string, string | number>) {
  const seen: Array<{ transactionId: string; status: string }> = [];
  let after: string | undefined;
  do {
    const page = await list(client, after === undefined ? query : { ...query, after }).expect(200);
    seen.push(...page.body.messages);
    after = page.body.next ?? undefined;
  } while (after !== undefined);
  return seen;
}

describe('messages', () => {
  const broker = useTestBroker();

  /** "orders": p1 holds o1-0..2, then p2 holds o2-0..1, each pushed later than the one before. */
  async function orders(client: BrokerClient): Promise<void> {
    await client.pushMany('orders', 3, 'p1', 'o1');
    await client.pushMany('orders', 2, 'p2', 'o2');
  }

  describe('GET /api/v1/messages', () => {
    it("lists a queue's messages newest first, with the pop's fields and a status for the group", async () => {
      const { client } = broker;
      await orders(client);
      const lease = await client.popLeased('orders', { consumerGroup: 'g', batch: 1 }, 'p1');
      await client.ackAll(await client.popLeased('orders', { consumerGroup: 'g', batch: 10 }, 'p2')).expect(200);

      const page = await list(client, { queue: 'orders', consumerGroup: 'g' }).expect(200);

      expect(Object.keys(page.body)).toEqual(['messages', 'next']);
      expect(page.body.next).toBeNull();
      expect(ids(page.body.messages)).toEqual(['o2-1', 'o2-0', 'o1-2', 'o1-1', 'o1-0']);
      expect(Object.keys(page.body.messages[0])).toEqual([...MESSAGE_KEYS, 'status']);
      expect(page.body.messages.map((message: { status: string }) => message.status)).toEqual([
        'completed',
        'completed',
        'pending',
        'pending',
        'leased',
      ]);
      const leased = page.body.messages[4];
      expect(leased).toMatchObject({ partition: 'p1', leaseId: null, consumerGroup: 'g', deliveryAttempt: 1 });
      expect(leased.data).toEqual({ n: 0 });
      expect(JSON.stringify(page.body)).not.toContain(lease.leaseId);

      const queueMode = await list(client, { queue: 'orders' }).expect(200);
      expect(queueMode.body.messages.every((message: { status: string }) => message.status === 'pending')).toBe(true);
    });

    it('pages with next until null, and filters by partition, status and time', async () => {
      const { client, dataSource } = broker;
      await orders(client);
      // Younger than the default completed retention (1 h): the retention job of another test file, which spans
      // tenants, would delete them once acked.
      await ageMessages(dataSource, client.tenant, 3000);
      await client.pushMany('orders', 2, 'p1', 'late');
      await client.ackAll(await client.popLeased('orders', { batch: 1 }, 'p2')).expect(200);

      const all = await everyPage(client, { queue: 'orders', limit: 2 });
      expect(ids(all)).toEqual(['late-1', 'late-0', 'o2-1', 'o2-0', 'o1-2', 'o1-1', 'o1-0']);

      expect(ids(await everyPage(client, { queue: 'orders', partition: 'p2' }))).toEqual(['o2-1', 'o2-0']);
      expect(ids(await everyPage(client, { queue: 'orders', status: 'completed' }))).toEqual(['o2-0']);
      const recent = new Date(Date.now() - 600_000).toISOString();
      expect(ids(await everyPage(client, { queue: 'orders', from: recent }))).toEqual(['late-1', 'late-0']);
      expect(ids(await everyPage(client, { queue: 'orders', to: recent, limit: 3 }))).toHaveLength(5);
    });

    it.each([
      [{}, 400, 'queue is required'],
      [{ queue: 'orders', status: 'done' }, 400, 'status must be one of pending, leased, completed, dead_letter'],
      [{ queue: 'orders', limit: 0 }, 400, 'limit must be an integer between 1 and 1000'],
      [{ queue: 'orders', from: 'yesterday' }, 400, 'from must be an ISO-8601 timestamp'],
      [{ queue: 'orders', after: 'bm9wZQ' }, 400, 'after is not a page cursor'],
      [{ queue: 'nowhere' }, 404, 'queue not found'],
    ])('answers %j with %i', async (query, status, error) => {
      const { client } = broker;
      await orders(client);
      const answer = await list(client, query);
      expect([answer.status, answer.body]).toEqual([status, { error }]);
    });
  });

  describe('GET /api/v1/messages/:partitionId/:transactionId', () => {
    it('shows the message with its state in every group and its dead letters, never a lease id', async () => {
      const { client } = broker;
      await orders(client);
      const lease = await client.popLeased('orders', { consumerGroup: 'a', batch: 1 }, 'p1');
      const message = lease.messages[0];
      const dead = await client.popLeased('orders', { consumerGroup: 'b', batch: 1 }, 'p1');
      await client.ackAll(dead, 'dlq').expect(200);

      const answer = await client.get(`/api/v1/messages/${message.partitionId}/${message.transactionId}`).expect(200);

      expect(answer.body).toMatchObject({
        queue: 'orders',
        partition: 'p1',
        partitionId: message.partitionId,
        id: message.id,
        transactionId: 'o1-0',
        data: { n: 0 },
      });
      expect(
        answer.body.groups.map((g: { consumerGroup: string; status: string }) => [g.consumerGroup, g.status]),
      ).toEqual([
        ['a', 'leased'],
        ['b', 'dead_letter'],
      ]);
      expect(answer.body.groups[0]).toMatchObject({ leaseActive: true, deliveryAttempt: 1 });
      expect(answer.body.deadLetters).toEqual([
        expect.objectContaining({ consumerGroup: 'b', retryCount: 0, failedAt: expect.any(String) }),
      ]);
      expect(JSON.stringify(answer.body)).not.toContain(lease.leaseId);

      const missing = await client.get(`/api/v1/messages/${message.partitionId}/nope`);
      expect([missing.status, missing.body]).toEqual([404, { error: 'message not found' }]);
      const bad = await client.get('/api/v1/messages/not-a-uuid/o1-0');
      expect([bad.status, bad.body]).toEqual([400, { error: 'partitionId must be a UUID' }]);
    });
  });

  describe('DELETE /api/v1/messages/:partitionId/:transactionId', () => {
    it('refuses a message under a live lease with 409 and deletes it (with its dead letters) once released', async () => {
      const { client, dataSource } = broker;
      await orders(client);
      const lease = await client.popLeased('orders', { batch: 1 }, 'p1');
      const { partitionId, transactionId } = lease.messages[0];
      const path = `/api/v1/messages/${partitionId}/${transactionId}`;
      const before = await storedCounts(dataSource, client.tenant);

      const refused = await client.delete(path);
      expect([refused.status, refused.body]).toEqual([409, { error: 'message is under a live lease' }]);
      expect(await storedCounts(dataSource, client.tenant)).toEqual(before);

      await client.ackAll(lease, 'retry').expect(200);
      expect((await client.delete(path).expect(200)).body).toEqual({ deleted: true, message: true, deadLetters: 0 });
      expect(ids(await everyPage(client, { queue: 'orders', partition: 'p1' }))).toEqual(['o1-2', 'o1-1']);
      expect(ids((await client.popLeased('orders', { batch: 10 }, 'p1')).messages)).toEqual(['o1-1', 'o1-2']);
      const again = await client.delete(path);
      expect([again.status, again.body]).toEqual([404, { error: 'message not found' }]);
    });
  });

  describe('POST /api/v1/messages/:partitionId/:transactionId/retry', () => {
    it("puts a dead letter back at its partition's tail once, waking a parked poll", async () => {
      const { client, app } = broker;
      await client.pushMany('jobs', 1, undefined, 'job');
      const popped = await client.popLeased('jobs');
      await client.ackAll(popped, 'dlq').expect(200);
      const { partitionId } = popped.messages[0];
      const poll = client.pop('jobs', { wait: true, timeout: 30_000 }).then((response) => response);
      await waitFor(() => app.get(ParkedPolls).parkedCount(client.tenant, 'jobs', '__QUEUE_MODE__') === 1, 'parked');

      const retried = await client.post(`/api/v1/messages/${partitionId}/job-0/retry`).expect(200);

      expect(retried.body).toMatchObject({
        retried: true,
        transactionId: 'dlq:job-0',
        queue: 'jobs',
        partition: 'Default',
        deadLetters: 1,
      });
      const answer = await within(poll, 'the parked poll gets the retried message', 15_000);
      expect(ids((answer.body as PopBody).messages)).toEqual(['dlq:job-0']);
      expect((answer.body as PopBody).messages[0].data).toEqual({ n: 0 });
      expect((await client.get('/api/v1/dlq', { queue: 'jobs' })).body.total).toBe(0);
      const twice = await client.post(`/api/v1/messages/${partitionId}/job-0/retry`);
      expect([twice.status, twice.body]).toEqual([404, { error: 'dead letter not found' }]);
    });

    it("retries only the named group's dead letter when consumerGroup is given", async () => {
      const { client } = broker;
      await client.pushMany('jobs', 1, undefined, 'job');
      for (const group of ['a', 'b'])
        await client.ackAll(await client.popLeased('jobs', { consumerGroup: group }), 'dlq');
      const { partitionId } = (await list(client, { queue: 'jobs' })).body.messages[0];

      await client.post(`/api/v1/messages/${partitionId}/job-0/retry?consumerGroup=a`).expect(200);

      const left = (await client.get('/api/v1/dlq', { queue: 'jobs' })).body.messages;
      expect(left.map((letter: { consumerGroup: string }) => letter.consumerGroup)).toEqual(['b']);
    });
  });

  describe('POST /api/v1/messages/:partitionId/:transactionId/dlq', () => {
    it("takes a poison message out of its partition into a group's dead letters, and retry brings it back", async () => {
      const { client } = broker;
      await orders(client);
      const { partitionId } = (await list(client, { queue: 'orders', partition: 'p1' })).body.messages[0];
      const lease = await client.popLeased('orders', { batch: 1 }, 'p1');
      const refused = await client.post(`/api/v1/messages/${partitionId}/o1-0/dlq`);
      expect([refused.status, refused.body]).toEqual([409, { error: 'message is under a live lease' }]);
      await client.ackAll(lease, 'retry').expect(200);

      const moved = await client.post(`/api/v1/messages/${partitionId}/o1-0/dlq?consumerGroup=billing`).expect(200);

      expect(moved.body).toMatchObject({ moved: true, consumerGroup: 'billing' });
      const letters = (await client.get('/api/v1/dlq', { queue: 'orders' })).body.messages;
      expect(letters).toEqual([
        expect.objectContaining({
          transactionId: 'o1-0',
          consumerGroup: 'billing',
          errorMessage: 'moved to the dead-letter queue by an operator',
          data: { n: 0 },
        }),
      ]);
      expect(ids((await client.popLeased('orders', { batch: 10 }, 'p1')).messages)).toEqual(['o1-1', 'o1-2']);
      const missing = await client.post(`/api/v1/messages/${partitionId}/o1-0/dlq`);
      expect([missing.status, missing.body]).toEqual([404, { error: 'message not found' }]);

      await client.post(`/api/v1/messages/${partitionId}/o1-0/retry`).expect(200);
      expect(ids(await everyPage(client, { queue: 'orders', partition: 'p1' }))).toEqual(['dlq:o1-0', 'o1-2', 'o1-1']);
    });
  });

  it('answers payloads as they were pushed, minified: listed, shown, dead-lettered and retried', async () => {
    const { client } = broker;
    await client.postText('/api/v1/push', `{"items": ${sentItems('texts', 'p')}}`).expect(201);

    const listed = await list(client, { queue: 'texts', limit: 100 }).expect(200);
    expectPayloadsAsSent(listed.text, 'p');
    const { partitionId } = listed.body.messages[0];
    for (const n of SENT_PAYLOADS.keys()) {
      const shown = await client.get(`/api/v1/messages/${partitionId}/p-${n}`).expect(200);
      expect(shown.text).toContain(storedAs(`p-${n}`, n));
      await client.post(`/api/v1/messages/${partitionId}/p-${n}/dlq`).expect(200);
    }
    expectPayloadsAsSent((await client.get('/api/v1/dlq', { queue: 'texts' }).expect(200)).text, 'p');
    for (const n of SENT_PAYLOADS.keys()) await client.post(`/api/v1/messages/${partitionId}/p-${n}/retry`).expect(200);
    const popped = await client.pop('texts', { batch: 100 }).expect(200);
    expectPayloadsAsSent(popped.text, 'dlq:p');
  });

  describe('DELETE /api/v1/queues/:queue/clear', () => {
    it('deletes the messages, moves every group to the end and ends its leases; new pushes flow', async () => {
      const { client, dataSource } = broker;
      await orders(client);
      const lease = await client.popLeased('orders', { consumerGroup: 'g', batch: 1 }, 'p1');

      const cleared = await client.delete('/api/v1/queues/orders/clear').expect(200);

      expect(cleared.body).toEqual({ cleared: true, queue: 'orders', messagesDeleted: 5, partitions: 2 });
      const stale = lease.messages[0];
      const ack = await client
        .ack({
          transactionId: stale.transactionId,
          partitionId: stale.partitionId,
          consumerGroup: 'g',
          leaseId: lease.leaseId,
        })
        .expect(200);
      expect(ack.body[0]).toMatchObject({ success: false });
      expect((await client.extend(lease.leaseId!, 60)).body).toMatchObject({ renewed: 0 });
      await client.pop('orders', { consumerGroup: 'g' }).expect(204);
      expect((await list(client, { queue: 'orders' })).body.messages).toEqual([]);
      expect((await cursors(dataSource, client.tenant, 'orders')).every((row) => !row.leaseLive)).toBe(true);

      await client.pushMany('orders', 1, 'p1', 'fresh');
      expect(ids((await client.popLeased('orders', { consumerGroup: 'g' })).messages)).toEqual(['fresh-0']);
    });

    it('clears one partition when asked, and answers 404 for unknown queues and partitions', async () => {
      const { client } = broker;
      await orders(client);

      const cleared = await client.delete('/api/v1/queues/orders/clear?partition=p2').expect(200);

      expect(cleared.body).toEqual({
        cleared: true,
        queue: 'orders',
        partition: 'p2',
        messagesDeleted: 2,
        partitions: 1,
      });
      expect(ids(await everyPage(client, { queue: 'orders' }))).toEqual(['o1-2', 'o1-1', 'o1-0']);
      const noPartition = await client.delete('/api/v1/queues/orders/clear?partition=p9');
      expect([noPartition.status, noPartition.body]).toEqual([404, { error: 'partition not found' }]);
      const noQueue = await client.delete('/api/v1/queues/nowhere/clear');
      expect([noQueue.status, noQueue.body]).toEqual([404, { error: 'queue not found' }]);
    });
  });

  it("behaves for another tenant as if the owner's queue and messages did not exist", async () => {
    const { client: owner, app, dataSource } = broker;
    await orders(owner);
    const popped = await owner.popLeased('orders', { batch: 1 }, 'p1');
    await owner.ackAll(popped, 'dlq').expect(200);
    const { partitionId, transactionId } = popped.messages[0];
    const before = await storedCounts(dataSource, owner.tenant);
    const stranger = new BrokerClient(app, newTenant());

    expect((await list(stranger, { queue: 'orders' })).status).toBe(404);
    expect((await stranger.get(`/api/v1/messages/${partitionId}/${transactionId}`)).status).toBe(404);
    expect((await stranger.delete(`/api/v1/messages/${partitionId}/${transactionId}`)).status).toBe(404);
    expect((await stranger.post(`/api/v1/messages/${partitionId}/${transactionId}/retry`)).status).toBe(404);
    expect((await stranger.post(`/api/v1/messages/${partitionId}/o1-1/dlq`)).status).toBe(404);
    expect((await stranger.delete('/api/v1/queues/orders/clear')).status).toBe(404);

    expect(await storedCounts(dataSource, owner.tenant)).toEqual(before);
  });

  describe('bounded in bytes', () => {
    let app: NestExpressApplication;

    beforeAll(async () => {
      app = await createTestApp({ RESPONSE_MAX_BYTES: '1mb', MESSAGE_MAX_BYTES: '512kb' });
    });

    afterAll(async () => {
      await app.close();
    });

    it('stops a page short of limit where it would pass RESPONSE_MAX_BYTES, and next carries on', async () => {
      const client = new BrokerClient(app, newTenant());
      const big = 'x'.repeat(400 * 1024);
      for (let n = 0; n < 4; n += 1) {
        expect((await client.push([{ queue: 'big', payload: big, transactionId: `big-${n}` }])).status).toBe(201);
      }

      const first = await list(client, { queue: 'big' }).expect(200);

      expect(Buffer.byteLength(first.text)).toBeLessThanOrEqual(1024 * 1024);
      expect(ids(first.body.messages)).toEqual(['big-3', 'big-2']);
      expect(ids(await everyPage(client, { queue: 'big' }))).toEqual(['big-3', 'big-2', 'big-1', 'big-0']);
    });
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('changing one message while polls wait (real PostgreSQL)', () => {
  const broker = useTestBroker();

  it("wakes the polls that parked while a delete held their partition's cursors", async () => {
    const { client } = broker;
    const polls = broker.app.get(ParkedPolls);
    const [, doomed, left] = await client.pushMany('held', 3);
    const first = await client.popLeased('held', { batch: 1, consumerGroup: 'g' });
    await client.ackAll(first).expect(200);
    const { partitionId } = first.messages[0];
    // The delete locks the partition's cursors, then waits for the message's row, which this session holds.
    const holder = await openSession();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM messages WHERE tenant_id = $1 AND transaction_id = $2 FOR UPDATE', [
        client.tenant,
        doomed,
      ]);
      const deleted = client.delete(`/api/v1/messages/${partitionId}/${doomed}`).then((answer) => answer);
      await waitForLockWaiter(holder, 'DELETE FROM messages');
      // The claim skips the held cursor, and the poll parks with a message there and no push to come.
      const poll = client
        .pop('held', { batch: 1, consumerGroup: 'g', wait: true, timeout: 600_000 })
        .then((answer) => answer);
      await waitFor(() => polls.parkedCount(client.tenant, 'held', 'g') === 1, 'the poll parked');
      await holder.query('COMMIT');

      expect((await deleted).status).toBe(200);
      await waitFor(() => polls.parkedCount(client.tenant, 'held', 'g') === 0, 'the parked poll woken by the delete');
      const answer = await poll;
      expect(answer.status).toBe(200);
      expect((answer.body as PopBody).messages.map((message) => message.transactionId)).toEqual([left]);
    } finally {
      await holder.end();
    }
  });
});
