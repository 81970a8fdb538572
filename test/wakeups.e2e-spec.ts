import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { WakeupRepository } from '../src/wakeup/wakeup.repository';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient, PopBody, Query } from './support/broker-client';
import { expireLeases, sql } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';
import { waitFor, within } from './support/wait';

/**
 * A parked poll's own timeout: far past every bound below, so an answer
 * within a bound can only come from a wakeup.
 */
const PARKED_TIMEOUT_MS = 120_000;
/** How soon a woken poll must answer: generous, the machine may be loaded. */
const WOKEN_WITHIN_MS = 15_000;
const GROUP = 'workers';

describe('parked polls wake when something they could claim becomes claimable', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let wakeup: ParkedPolls;
  let client: BrokerClient;

  beforeAll(async () => {
    app = await createTestApp();
    dataSource = app.get(Database);
    wakeup = app.get(ParkedPolls);
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    client = new BrokerClient(app, newTenant());
  });

  /**
   * A long poll, started now; resolves once it has looked, found nothing and
   * parked. The answer is wrapped so that awaiting the parking does not await it.
   */
  async function parkedPop(
    queue: string,
    query: Query = {},
    partition?: string,
    group = GROUP,
  ): Promise<{ answer: Promise<request.Response> }> {
    const parkedBefore = wakeup.parkedCount(client.tenant, queue, group);
    const answer = new Promise<request.Response>((resolve, reject) => {
      client
        .pop(queue, { consumerGroup: group, wait: true, timeout: PARKED_TIMEOUT_MS, batch: 10, ...query }, partition)
        .then(resolve, reject);
    });
    await waitFor(() => wakeup.parkedCount(client.tenant, queue, group) > parkedBefore, 'the poll parks');
    return { answer };
  }

  async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
    let settled = false;
    void promise.then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, ms));
    return settled;
  }

  async function holder(queue: string, query: Query = {}): Promise<PopBody> {
    const response = await client.pop(queue, { consumerGroup: GROUP, batch: 10, leaseSeconds: 60, ...query });
    expect(response.status).toBe(200);
    return response.body;
  }

  const transactionIds = (body: PopBody): string[] => body.messages.map((message) => message.transactionId);
  const attempts = (body: PopBody): number[] => body.messages.map((message) => message.deliveryAttempt);

  it.each(['failed', 'retry'])(
    'a batch nacked with status %s goes to the consumer parked on it at once, with deliveryAttempt 2',
    async (status) => {
      await client.pushMany('jobs', 2);
      const held = await holder('jobs');
      const parked = await parkedPop('jobs');

      const nack = await client.ackBatch({
        consumerGroup: GROUP,
        acknowledgments: [
          {
            transactionId: held.messages[0].transactionId,
            partitionId: held.partitionId,
            leaseId: held.leaseId,
            status,
          },
        ],
      });

      expect(nack.body[0]).toMatchObject({ success: true, leaseReleased: true });
      const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(transactionIds(woken.body)).toEqual(['jobs-Default-0', 'jobs-Default-1']);
      expect(attempts(woken.body)).toEqual([2, 2]);
      expect(woken.body.leaseId).not.toBe(held.leaseId);
    },
  );

  it('a lease released by acking its batch lets the parked consumer have the messages pushed behind it', async () => {
    await client.pushMany('jobs', 1, undefined, 'first');
    const held = await holder('jobs');
    await client.pushMany('jobs', 2, undefined, 'behind');
    const parked = await parkedPop('jobs');

    const ack = await client.ackAll(held);

    expect(ack.body[0]).toMatchObject({ success: true, leaseReleased: true });
    const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
    expect(woken.status).toBe(200);
    expect(transactionIds(woken.body)).toEqual(['behind-0', 'behind-1']);
    expect(attempts(woken.body)).toEqual([1, 1]);
  });

  it('a lease that expires while a consumer is parked is redelivered to it, with no request noticing the expiry', async () => {
    await client.pushMany('jobs', 2);
    const held = await holder('jobs', { leaseSeconds: 1 });
    const parked = await parkedPop('jobs');

    const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);

    expect(woken.status).toBe(200);
    expect(transactionIds(woken.body)).toEqual(transactionIds(held));
    expect(attempts(woken.body)).toEqual([2, 2]);
  });

  it("a lease made to expire behind the broker's back is found by the sweep", async () => {
    await client.pushMany('jobs', 1);
    const held = await holder('jobs', { leaseSeconds: 3_600 });
    const parked = await parkedPop('jobs');

    await expireLeases(dataSource, client.tenant, held.leaseId!);

    const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
    expect(woken.status).toBe(200);
    expect(attempts(woken.body)).toEqual([2]);
  });

  it('does not wake a parked poll, sweep after sweep, for an ended lease with nothing left past its cursor', async () => {
    await client.pushMany('jobs', 1);
    const held = await holder('jobs', { leaseSeconds: 3_600 });
    const parked = await parkedPop('jobs');
    // Its messages were acked behind the lease's back: the lease stays set, and ending it frees nothing.
    await sql(dataSource, 'UPDATE consumers SET committed_offset = 1 WHERE tenant_id = $1', [client.tenant]);
    await expireLeases(dataSource, client.tenant, held.leaseId!);
    const repository = app.get(WakeupRepository);
    const sweeps = jest.spyOn(repository, 'endingLeases');
    const announced = jest.spyOn(wakeup, 'redelivered');
    try {
      await waitFor(() => sweeps.mock.calls.length >= 3, 'three sweeps run');
      await Promise.all(sweeps.mock.results.map((result) => result.value));
      expect(announced.mock.calls.filter(([tenant]) => tenant === client.tenant)).toEqual([]);
      expect(await settledWithin(parked.answer, 0)).toBe(false);
    } finally {
      sweeps.mockRestore();
      announced.mockRestore();
    }
    await client.pushMany('jobs', 1, undefined, 'next');
    expect((await within(parked.answer, 'the parked poll answers the next push', WOKEN_WITHIN_MS)).status).toBe(200);
  });

  it("wakes only the group whose batch came back: another group's parked poll stays parked", async () => {
    await client.pushMany('jobs', 1);
    const other = await client.pop('jobs', { consumerGroup: 'auditors', batch: 10 });
    expect(other.status).toBe(200);
    const held = await holder('jobs');
    const othersPoll = await parkedPop('jobs', {}, undefined, 'auditors');
    const parked = await parkedPop('jobs');

    await client.ackAll(held, 'failed');

    expect((await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS)).status).toBe(200);
    expect(wakeup.parkedCount(client.tenant, 'jobs', 'auditors')).toBe(1);
    expect(await settledWithin(othersPoll.answer, 0)).toBe(false);
    // Let it go: its lease ends, it takes the batch back.
    await client.ackAll(other.body, 'failed');
    expect((await within(othersPoll.answer, 'the other group answers', WOKEN_WITHIN_MS)).status).toBe(200);
  });

  describe('a queue or partition that does not exist yet', () => {
    const stored = () =>
      sql(
        dataSource,
        `SELECT (SELECT count(*) FROM queues WHERE tenant_id = $1)::int AS queues,
                (SELECT count(*) FROM partitions WHERE tenant_id = $1)::int AS partitions,
                (SELECT count(*) FROM consumer_groups WHERE tenant_id = $1)::int AS groups`,
        [client.tenant],
      );

    it('parks a poll on an unknown queue, creating nothing, and the push that creates the queue wakes it', async () => {
      const parked = await parkedPop('later');
      expect(await stored()).toEqual([{ queues: 0, partitions: 0, groups: 0 }]);

      await client.pushMany('later', 1);

      const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(transactionIds(woken.body)).toEqual(['later-Default-0']);
    });

    it('parks a poll on an unknown partition of a known queue, and the push that creates the partition wakes it', async () => {
      await client.pushMany('jobs', 1, 'a');
      const before = await stored();
      const parked = await parkedPop('jobs', {}, 'b');
      expect(await stored()).toEqual(before);

      await client.pushMany('jobs', 1, 'b');

      const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(transactionIds(woken.body)).toEqual(['jobs-b-0']);
    });

    it('gives a poll with subscriptionFrom=now, parked before its queue exists, the message that created the queue', async () => {
      const parked = await parkedPop('later', { subscriptionFrom: 'now' });

      await client.pushMany('later', 1);

      const woken = await within(parked.answer, 'the parked poll answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(transactionIds(woken.body)).toEqual(['later-Default-0']);
    });
  });
});
