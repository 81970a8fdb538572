import { uuidv7 } from '../src/common/uuid';
import { BrokerClient, PopBody } from './support/broker-client';
import { cursors, expireLeases, sql, storedCounts } from './support/db-state';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';

const RESULT_KEYS = ['index', 'transactionId', 'success', 'error', 'leaseReleased', 'dlq'];

describe('POST /api/v1/ack and /api/v1/ack/batch', () => {
  const broker = useTestBroker();

  /** Pushes count messages to one queue and pops them all under one lease. */
  function leased(count = 3, query: Record<string, string | number> = {}): Promise<PopBody> {
    return broker.client.pushAndPop('jobs', count, { batch: 100, ...query });
  }

  const ackOf = (pop: PopBody, index: number, extra: Record<string, unknown> = {}) => ({
    transactionId: pop.messages[index].transactionId,
    partitionId: pop.messages[index].partitionId,
    leaseId: pop.leaseId,
    consumerGroup: pop.consumerGroup,
    ...extra,
  });

  describe('completed', () => {
    it('answers 200 with an array of one result in the contract shape on the single route', async () => {
      const pop = await leased(1);

      const response = await broker.client.ack(ackOf(pop, 0));

      expect(response.status).toBe(200);
      expect(response.body).toHaveLength(1);
      expect(Object.keys(response.body[0])).toEqual(RESULT_KEYS);
      expect(response.body[0]).toEqual({
        index: 0,
        transactionId: pop.messages[0].transactionId,
        success: true,
        error: null,
        leaseReleased: true,
        dlq: false,
      });
    });

    it('commits the cursor up to the message and keeps the lease until the whole batch is committed', async () => {
      const pop = await leased(3);

      const partial = await broker.client.ack(ackOf(pop, 1));

      expect(partial.body[0]).toMatchObject({ success: true, leaseReleased: false });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
        { committedOffset: 2, leaseId: pop.leaseId, leaseLive: true, leaseEndOffset: 3 },
      ]);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });

      const rest = await broker.client.ack(ackOf(pop, 2));

      expect(rest.body[0]).toMatchObject({ success: true, leaseReleased: true });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
        { committedOffset: 3, leaseId: null, leaseEndOffset: null, hasExpiry: false },
      ]);
    });

    it('makes a released lease unextendable: extend answers renewed 0', async () => {
      const pop = await leased(2);

      await broker.client.ackAll(pop);

      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({
        success: false,
        renewed: 0,
        newExpiresAt: null,
      });
    });

    it('never moves the cursor backwards and answers success for a repeated ack', async () => {
      const pop = await leased(3);
      await broker.client.ack(ackOf(pop, 1));

      const earlier = await broker.client.ack(ackOf(pop, 0));

      expect(earlier.body[0]).toMatchObject({ success: true, error: null, leaseReleased: false });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0].committedOffset).toBe(2);
    });

    it.each([undefined, null, 'completed', 'success', 'acked', 'ok', 'COMPLETED'])(
      'treats status %p as completed',
      async (status) => {
        const pop = await leased(1);

        const response = await broker.client.ack(ackOf(pop, 0, status === undefined ? {} : { status }));

        expect(response.body[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });
        expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0].committedOffset).toBe(1);
      },
    );

    it('releases each partition of a multi-partition lease as its own span completes', async () => {
      await broker.client.pushMany('jobs', 2, 'a');
      await broker.client.pushMany('jobs', 2, 'b');
      const pop: PopBody = (await broker.client.pop('jobs', { partitions: 2, batch: 10 })).body;
      const inFirst = pop.messages.filter((message) => message.partitionId === pop.partitionId);

      const firstDone = await broker.client.ackBatch({
        acknowledgments: inFirst.map(({ transactionId, partitionId }) => ({
          transactionId,
          partitionId,
          leaseId: pop.leaseId,
        })),
      });

      expect(firstDone.body.map((result: { leaseReleased: boolean }) => result.leaseReleased)).toEqual([false, true]);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });
      await broker.client.ackAll(pop);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 0 });
    });
  });

  describe('lease checks', () => {
    it('refuses an ack with another lease id: success false, "invalid or expired lease", the cursor does not move', async () => {
      const pop = await leased(2);

      const response = await broker.client.ack(ackOf(pop, 1, { leaseId: uuidv7() }));

      expect(response.status).toBe(200);
      expect(response.body[0]).toEqual({
        index: 0,
        transactionId: pop.messages[1].transactionId,
        success: false,
        error: 'invalid or expired lease',
        leaseReleased: false,
        dlq: false,
      });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
        { committedOffset: 0, leaseId: pop.leaseId, leaseLive: true },
      ]);
    });

    it('refuses a leased ack once the lease has expired, even before anyone re-claims the batch', async () => {
      const pop = await leased(1);
      await expireLeases(broker.dataSource, broker.client.tenant, pop.leaseId!);

      const response = await broker.client.ack(ackOf(pop, 0));

      expect(response.body[0]).toMatchObject({ success: false, error: 'invalid or expired lease' });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0].committedOffset).toBe(0);
    });

    it("skips the lease check without leaseId and can commit under another worker's live lease (the documented hazard)", async () => {
      const pop = await leased(2);

      const response = await broker.client.ack(ackOf(pop, 1, { leaseId: undefined }));

      expect(response.body[0]).toMatchObject({ success: true, leaseReleased: true });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
        { committedOffset: 2, leaseId: null },
      ]);
    });

    it('refuses a leased ack for a message outside the leased batch', async () => {
      const pop = await leased(1);
      await broker.client.pushMany('jobs', 1, undefined, 'later');
      const [{ partitionId }] = pop.messages;

      const response = await broker.client.ack({ transactionId: 'later-0', partitionId, leaseId: pop.leaseId });

      expect(response.body[0]).toMatchObject({ success: false, error: 'message is not in the batch of this lease' });
    });

    it('refuses an ack without leaseId for a message never delivered to the group', async () => {
      const pop = await leased(1);
      await broker.client.pushMany('jobs', 1, undefined, 'later');

      const response = await broker.client.ack({ transactionId: 'later-0', partitionId: pop.partitionId });

      expect(response.body[0]).toMatchObject({
        success: false,
        error: 'message has not been delivered to this consumer group',
      });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0].committedOffset).toBe(0);
    });
  });

  describe('failures (nack)', () => {
    it('releases the lease at once and redelivers the batch from the cursor under a new lease with deliveryAttempt increased', async () => {
      const pop = await leased(3);
      await broker.client.ack(ackOf(pop, 0));

      const nack = await broker.client.ack(ackOf(pop, 1, { status: 'failed', error: 'boom' }));

      expect(nack.body[0]).toEqual({
        index: 0,
        transactionId: pop.messages[1].transactionId,
        success: true,
        error: null,
        leaseReleased: true,
        dlq: false,
      });
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 0 });
      const again: PopBody = (await broker.client.pop('jobs', { batch: 100 })).body;
      expect(again.leaseId).not.toBe(pop.leaseId);
      expect(again.messages.map((message) => [message.transactionId, message.deliveryAttempt])).toEqual([
        [pop.messages[1].transactionId, 2],
        [pop.messages[2].transactionId, 2],
      ]);
    });

    it('redelivers only what was delivered before: messages pushed meanwhile come in the next, fresh batch', async () => {
      const pop = await leased(2);
      await broker.client.pushMany('jobs', 1, undefined, 'later');
      await broker.client.ack(ackOf(pop, 0, { status: 'nack' }));

      const redelivery: PopBody = (await broker.client.pop('jobs', { batch: 100 })).body;
      await broker.client.ackAll(redelivery);
      const fresh: PopBody = (await broker.client.pop('jobs', { batch: 100 })).body;

      expect(redelivery.messages.map((message) => message.deliveryAttempt)).toEqual([2, 2]);
      expect(fresh.messages.map((message) => [message.transactionId, message.deliveryAttempt])).toEqual([
        ['later-0', 1],
      ]);
    });

    it('counts a batch with several failures as one retry', async () => {
      const pop = await leased(3);

      const response = await broker.client.ackBatch({
        acknowledgments: [ackOf(pop, 0, { status: 'failed' }), ackOf(pop, 1, { status: 'failed', leaseId: undefined })],
      });

      expect(response.body.map((result: { success: boolean }) => result.success)).toEqual([true, true]);
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        retryCount: 1,
        committedOffset: 0,
      });
    });

    it('after retryLimit (3) failures sends the next failing message to the dead-letter queue and moves the cursor past it', async () => {
      await broker.client.pushMany('jobs', 2);
      const attempts: number[] = [];
      let last;
      for (let failure = 1; failure <= 4; failure++) {
        const pop: PopBody = (await broker.client.pop('jobs', { batch: 100 })).body;
        attempts.push(pop.messages[0].deliveryAttempt);
        last = await broker.client.ack(ackOf(pop, 0, { status: 'failed', error: `failure ${failure}` }));
      }

      expect(attempts).toEqual([1, 2, 3, 4]);
      expect(last?.body[0]).toMatchObject({ success: true, leaseReleased: true, dlq: true });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        committedOffset: 1,
        retryCount: 0,
      });
      const letters = await sql(
        broker.dataSource,
        'SELECT transaction_id, error_message, retry_count, seq::int AS seq FROM dead_letters WHERE tenant_id = $1',
        [broker.client.tenant],
      );
      expect(letters).toEqual([
        { transaction_id: 'jobs-Default-0', error_message: 'failure 4', retry_count: 3, seq: 1 },
      ]);
      const next: PopBody = (await broker.client.pop('jobs', { batch: 100 })).body;
      // The second message was in every one of the four batches.
      expect(next.messages.map((message) => [message.transactionId, message.deliveryAttempt])).toEqual([
        ['jobs-Default-1', 5],
      ]);
    });

    it('hands the batch back on status retry without spending a retry', async () => {
      const pop = await leased(1);

      const response = await broker.client.ack(ackOf(pop, 0, { status: 'retry' }));

      expect(response.body[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        retryCount: 0,
        leaseId: null,
        committedOffset: 0,
      });
      expect((await broker.client.pop('jobs')).body.messages[0].deliveryAttempt).toBe(2);
    });

    it('dead-letters at once on status dlq, whatever retries remain', async () => {
      const pop = await leased(2);

      const response = await broker.client.ack(ackOf(pop, 0, { status: 'dlq', error: 'poison' }));

      expect(response.body[0]).toMatchObject({ success: true, leaseReleased: true, dlq: true });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0].committedOffset).toBe(1);
      expect((await storedCounts(broker.dataSource, broker.client.tenant)).dead_letters).toBe(1);
    });

    it('does not dead-letter a message while earlier ones of the batch are unacknowledged: the batch is retried instead', async () => {
      const pop = await leased(2);

      const response = await broker.client.ack(ackOf(pop, 1, { status: 'dlq' }));

      expect(response.body[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        committedOffset: 0,
        retryCount: 1,
      });
      expect((await storedCounts(broker.dataSource, broker.client.tenant)).dead_letters).toBe(0);
    });

    it('refuses a failure for a message already committed', async () => {
      const pop = await leased(2);
      await broker.client.ack(ackOf(pop, 0));

      const response = await broker.client.ack(ackOf(pop, 0, { status: 'failed' }));

      expect(response.body[0]).toMatchObject({
        success: false,
        error: 'message already acknowledged',
        leaseReleased: false,
      });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        leaseLive: true,
        retryCount: 0,
      });
    });
  });

  describe('consumer groups', () => {
    it('treats an absent or null consumerGroup as queue mode', async () => {
      const pop = await leased(2);

      const response = await broker.client.ackBatch({
        acknowledgments: [ackOf(pop, 0, { consumerGroup: null }), ackOf(pop, 1, { consumerGroup: undefined })],
      });

      expect(response.body.map((result: { success: boolean }) => result.success)).toEqual([true, true]);
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        consumerGroup: '__QUEUE_MODE__',
        committedOffset: 2,
      });
    });

    it('applies the batch consumerGroup to items without one and lets an item name its own', async () => {
      await broker.client.pushMany('jobs', 1);
      const a: PopBody = (await broker.client.pop('jobs', { consumerGroup: 'a' })).body;
      const b: PopBody = (await broker.client.pop('jobs', { consumerGroup: 'b' })).body;

      const response = await broker.client.ackBatch({
        consumerGroup: 'a',
        acknowledgments: [ackOf(a, 0, { consumerGroup: undefined }), ackOf(b, 0, { consumerGroup: 'b' })],
      });

      expect(response.body.map((result: { success: boolean }) => result.success)).toEqual([true, true]);
      expect(
        (await cursors(broker.dataSource, broker.client.tenant, 'jobs')).map((row) => row.committedOffset),
      ).toEqual([1, 1]);
    });

    it("does not let one group's ack move another group's cursor", async () => {
      await broker.client.pushMany('jobs', 1);
      const a: PopBody = (await broker.client.pop('jobs', { consumerGroup: 'a' })).body;
      await broker.client.pop('jobs', { consumerGroup: 'b' });

      const response = await broker.client.ack(ackOf(a, 0, { consumerGroup: 'b' }));

      expect(response.body[0]).toMatchObject({ success: false, error: 'invalid or expired lease' });
      expect(
        (await cursors(broker.dataSource, broker.client.tenant, 'jobs')).map((row) => row.committedOffset),
      ).toEqual([0, 0]);
    });
  });

  describe('unknown things answer success false, never an error status', () => {
    it.each([
      ['an unknown partition', () => ({ partitionId: uuidv7() }), 'partition not found'],
      ['an unknown transactionId', () => ({ transactionId: 'nope' }), 'message not found in this partition'],
    ])('for %s', async (_case, override, error) => {
      const pop = await leased(1);

      const response = await broker.client.ack(ackOf(pop, 0, override()));

      expect(response.status).toBe(200);
      expect(response.body[0]).toMatchObject({ success: false, error, leaseReleased: false, dlq: false });
      expect((await cursors(broker.dataSource, broker.client.tenant, 'jobs'))[0]).toMatchObject({
        committedOffset: 0,
        leaseLive: true,
      });
    });

    it("for another tenant's partition and lease, exactly as if they did not exist, moving nothing", async () => {
      const pop = await leased(1);
      const intruder = new BrokerClient(broker.app, newTenant());

      const withLease = await intruder.ack(ackOf(pop, 0));
      const withoutLease = await intruder.ack(ackOf(pop, 0, { leaseId: undefined, status: 'failed' }));

      expect(withLease.body[0]).toMatchObject({ success: false, error: 'partition not found' });
      expect(withoutLease.body[0]).toMatchObject({ success: false, error: 'partition not found' });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'jobs')).toMatchObject([
        { committedOffset: 0, leaseId: pop.leaseId, leaseLive: true, retryCount: 0 },
      ]);
    });

    it('applies the other acknowledgments of a batch when some are refused', async () => {
      const pop = await leased(2);

      const response = await broker.client.ackBatch({
        acknowledgments: [ackOf(pop, 0), ackOf(pop, 1, { partitionId: uuidv7() }), ackOf(pop, 1)],
      });

      expect(
        response.body.map((result: { index: number; success: boolean }) => [result.index, result.success]),
      ).toEqual([
        [0, true],
        [1, false],
        [2, true],
      ]);
    });

    it('answers 200 [] for an empty batch', async () => {
      const response = await broker.client.ackBatch({ acknowledgments: [] });

      expect(response.status).toBe(200);
      expect(response.body).toEqual([]);
    });
  });
});
