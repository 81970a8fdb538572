import { BrokerClient, PopBody } from './support/broker-client';
import { cursors, expireLeases, sql } from './support/db-state';
import { randomHex } from './support/tenant-fixture';
import { createTestApp } from './support/test-app';
import { useTestBroker } from './support/test-broker';

const STALE = 'invalid or expired lease';

/** The fencing token each message of a pop carries, in answer order. */
const epochs = (body: PopBody): number[] => body.messages.map((message) => message.leaseEpoch);

describe('fencing epochs', () => {
  const broker = useTestBroker();

  const pop = (queue: string, query: Record<string, string | number | boolean> = {}): Promise<PopBody> =>
    broker.client.popLeased(queue, query);

  describe('in the pop answer', () => {
    it('grows by one with every claim of the partition: after an ack, a nack and an expiry alike', async () => {
      await broker.client.pushMany('orders', 4);

      const first = await pop('orders', { batch: 1 });
      expect((await broker.client.ackAll(first)).body[0].success).toBe(true);
      const second = await pop('orders', { batch: 1 });
      expect((await broker.client.ackAll(second, 'failed')).body[0].success).toBe(true);
      const redelivered = await pop('orders', { batch: 1 });
      await expireLeases(broker.dataSource, broker.client.tenant, redelivered.leaseId!);
      const afterExpiry = await pop('orders', { batch: 1 });

      expect([first, second, redelivered, afterExpiry].map(epochs)).toEqual([[1], [2], [3], [4]]);
      expect(redelivered.messages[0].transactionId).toBe(second.messages[0].transactionId);
      expect(afterExpiry.messages[0]).toMatchObject({
        transactionId: second.messages[0].transactionId,
        deliveryAttempt: 3,
      });
      expect(afterExpiry.claimedPartitions).toEqual([
        { partitionId: afterExpiry.partitionId, partition: 'Default', leaseEpoch: 4, messages: 1 },
      ]);
    });

    it('is counted per partition and per consumer group, and given to every message of its partition', async () => {
      await broker.client.pushMany('orders', 2, 'a');
      await broker.client.pushMany('orders', 3, 'b');
      const a = await broker.client.pop('orders', { batch: 1, consumerGroup: 'g1' }, 'a');
      await broker.client.ackAll(a.body);

      const both = await pop('orders', { batch: 10, partitions: 2, consumerGroup: 'g1' });
      const other = await pop('orders', { batch: 10, partitions: 2, consumerGroup: 'g2' });

      const byPartition = (body: PopBody) =>
        Object.fromEntries(
          body.claimedPartitions.map((claim) => [claim.partition, [claim.leaseEpoch, claim.messages]]),
        );
      expect(byPartition(both)).toEqual({ a: [2, 1], b: [1, 3] });
      expect(byPartition(other)).toEqual({ a: [1, 2], b: [1, 3] });
      for (const message of both.messages) {
        const claim = both.claimedPartitions.find((entry) => entry.partitionId === message.partitionId)!;
        expect(message.leaseEpoch).toBe(claim.leaseEpoch);
      }
      expect(both.partitionsClaimed).toBe(both.claimedPartitions.length);
      // In the order the messages come: partition by partition.
      expect(both.claimedPartitions.map((claim) => claim.partitionId)).toEqual([
        ...new Set(both.messages.map((message) => message.partitionId)),
      ]);
    });

    it('counts autoAck claims too, so a later leased claim still carries a higher epoch', async () => {
      await broker.client.pushMany('orders', 2);

      const automatic = await pop('orders', { batch: 1, autoAck: true });
      const leased = await pop('orders', { batch: 1 });

      expect(automatic.leaseId).toBeNull();
      expect([epochs(automatic), epochs(leased)]).toEqual([[1], [2]]);
    });

    it('is stored with the cursor, so a redelivery after a restart of the broker continues from it', async () => {
      await broker.client.pushMany('orders', 1);
      const held = await pop('orders');
      await expireLeases(broker.dataSource, broker.client.tenant, held.leaseId!);

      const restarted = await createTestApp();
      try {
        const again = await new BrokerClient(restarted, broker.client.tenant).pop('orders');
        expect(epochs(again.body)).toEqual([2]);
      } finally {
        await restarted.close();
      }
    });
  });

  describe('on an ack', () => {
    async function claimedTwice(): Promise<{ stale: PopBody; current: PopBody }> {
      await broker.client.pushMany('orders', 2);
      const stale = await pop('orders', { batch: 2 });
      await expireLeases(broker.dataSource, broker.client.tenant, stale.leaseId!);
      const current = await pop('orders', { batch: 2 });
      return { stale, current };
    }

    it("is refused like a stale lease when it is not the partition's latest claim, and changes nothing", async () => {
      const { stale, current } = await claimedTwice();
      const before = await cursors(broker.dataSource, broker.client.tenant, 'orders');

      const [message] = stale.messages;
      // The epoch alone fences, even with the current holder's lease id.
      const withCurrentLease = await broker.client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: current.leaseId,
        leaseEpoch: message.leaseEpoch,
      });
      const withoutLease = await broker.client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseEpoch: message.leaseEpoch,
      });

      expect(withCurrentLease.status).toBe(200);
      expect(withCurrentLease.body[0]).toMatchObject({ success: false, error: STALE, leaseReleased: false });
      expect(withoutLease.body[0]).toMatchObject({ success: false, error: STALE });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'orders')).toEqual(before);
    });

    it("is accepted when it is the latest claim's, with or without the lease id", async () => {
      const { current } = await claimedTwice();
      const [first, second] = current.messages;

      const answer = await broker.client.ackBatch({
        acknowledgments: [
          {
            transactionId: first.transactionId,
            partitionId: first.partitionId,
            leaseId: current.leaseId,
            leaseEpoch: first.leaseEpoch,
          },
          { transactionId: second.transactionId, partitionId: second.partitionId, leaseEpoch: second.leaseEpoch },
        ],
      });

      expect(answer.body.map((result: { success: boolean }) => result.success)).toEqual([true, true]);
      expect(answer.body[1].leaseReleased).toBe(true);
    });

    it('judges each item of a batch on its own', async () => {
      const { stale, current } = await claimedTwice();
      const ack = (body: PopBody, index: number, leaseEpoch: number) => ({
        transactionId: body.messages[index].transactionId,
        partitionId: body.messages[index].partitionId,
        leaseEpoch,
      });

      const answer = await broker.client.ackBatch({
        acknowledgments: [ack(stale, 0, stale.messages[0].leaseEpoch), ack(current, 0, current.messages[0].leaseEpoch)],
      });

      expect(answer.body.map((result: { error: string | null }) => result.error)).toEqual([STALE, null]);
    });

    it.each([
      ['zero', 0],
      ['negative', -1],
      ['a fraction', 1.5],
      ['a string', '2'],
      ['a boolean', true],
      ['beyond a safe integer', Number.MAX_SAFE_INTEGER + 2],
    ])('answers 400 to a leaseEpoch that is %s, and applies nothing', async (_name, leaseEpoch) => {
      await broker.client.pushMany('orders', 1);
      const held = await pop('orders');
      const [message] = held.messages;
      const acknowledgment = { transactionId: message.transactionId, partitionId: message.partitionId, leaseEpoch };

      const single = await broker.client.ack(acknowledgment);
      const batch = await broker.client.ackBatch({ acknowledgments: [acknowledgment] });

      expect(single.status).toBe(400);
      expect(single.body).toEqual({ error: `leaseEpoch must be an integer between 1 and ${Number.MAX_SAFE_INTEGER}` });
      expect(batch.status).toBe(400);
      expect(batch.body.error).toBe(
        `acknowledgments[0].leaseEpoch must be an integer between 1 and ${Number.MAX_SAFE_INTEGER}`,
      );
      expect((await cursors(broker.dataSource, broker.client.tenant, 'orders'))[0]).toMatchObject({
        committedOffset: 0,
      });
    });

    it('takes a null leaseEpoch as none', async () => {
      await broker.client.pushMany('orders', 1);
      const [message] = (await pop('orders')).messages;

      const answer = await broker.client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseEpoch: null,
      });

      expect(answer.body[0]).toMatchObject({ success: true });
    });
  });

  /*
   * The pattern the broker.client documentation teaches, end to end: a downstream
   * table keeps the highest epoch written per partition and refuses a write
   * carrying a lower one. Worker A pops, then stalls past its lease; worker B
   * gets the batch again and writes; A wakes up and writes too late.
   */
  describe('guarding a downstream store', () => {
    // The handler's own store, here a table in a schema of its own beside the broker's.
    const table = `downstream.order_totals_${randomHex()}`;

    beforeAll(async () => {
      await sql(broker.dataSource, 'CREATE SCHEMA IF NOT EXISTS downstream');
      await sql(
        broker.dataSource,
        `CREATE TABLE ${table} (partition_id uuid PRIMARY KEY, lease_epoch bigint NOT NULL, total numeric NOT NULL)`,
      );
    });

    afterAll(async () => {
      await sql(broker.dataSource, `DROP TABLE ${table}`);
    });

    /** The fenced write: applied only when no later claim has written. Answers whether it was applied. */
    async function write(partitionId: string, leaseEpoch: number, total: number): Promise<boolean> {
      const applied: unknown[] = await sql(
        broker.dataSource,
        `INSERT INTO ${table} AS t (partition_id, lease_epoch, total) VALUES ($1, $2, $3)
         ON CONFLICT (partition_id) DO UPDATE SET lease_epoch = EXCLUDED.lease_epoch, total = EXCLUDED.total
          WHERE t.lease_epoch <= EXCLUDED.lease_epoch
         RETURNING partition_id`,
        [partitionId, leaseEpoch, total],
      );
      return applied.length === 1;
    }

    it("refuses a paused worker's late write while the new holder's write stands", async () => {
      await broker.client.pushMany('orders', 1);
      const a = await pop('orders', { leaseSeconds: 1 });
      const [aMessage] = a.messages;

      // A stalls; its one-second lease runs out and B's waiting pop is handed the batch.
      const b = await pop('orders', { wait: true, timeout: 30_000 });
      const [bMessage] = b.messages;
      expect(bMessage.transactionId).toBe(aMessage.transactionId);
      expect(bMessage.leaseEpoch).toBeGreaterThan(aMessage.leaseEpoch);

      expect(await write(bMessage.partitionId, bMessage.leaseEpoch, 200)).toBe(true);
      // A wakes up and writes what it computed before it stalled.
      expect(await write(aMessage.partitionId, aMessage.leaseEpoch, 100)).toBe(false);
      // The same holder writing again is not fenced out.
      expect(await write(bMessage.partitionId, bMessage.leaseEpoch, 201)).toBe(true);

      const stored = await sql(
        broker.dataSource,
        `SELECT lease_epoch::int AS lease_epoch, total::text AS total FROM ${table} WHERE partition_id = $1`,
        [bMessage.partitionId],
      );
      expect(stored).toEqual([{ lease_epoch: bMessage.leaseEpoch, total: '201' }]);

      const late = await broker.client.ack({
        transactionId: aMessage.transactionId,
        partitionId: aMessage.partitionId,
        leaseId: a.leaseId,
        leaseEpoch: aMessage.leaseEpoch,
      });
      const current = await broker.client.ack({
        transactionId: bMessage.transactionId,
        partitionId: bMessage.partitionId,
        leaseId: b.leaseId,
        leaseEpoch: bMessage.leaseEpoch,
      });
      expect(late.body[0]).toMatchObject({ success: false, error: STALE });
      expect(current.body[0]).toMatchObject({ success: true, leaseReleased: true });
    });
  });
});
