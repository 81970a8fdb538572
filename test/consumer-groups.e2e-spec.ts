import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, cursors, sql } from './support/db-state';
import { newTenant, onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor, within } from './support/wait';

const ids = (body: PopBody) => body.messages.map((message) => message.transactionId);
const groups = (client: BrokerClient, query: Record<string, string | number> = {}) =>
  client.get('/api/v1/consumer-groups', query);
const seek = (client: BrokerClient, group: string, queue: string, body: unknown, partition?: string) =>
  client.post(
    `/api/v1/consumer-groups/${group}/queues/${queue}${partition === undefined ? '' : `/partitions/${partition}`}/seek`,
    body,
  );

/** The database clock `seconds` from now, in the contract's format. */
async function databaseTime(
  broker: { dataSource: import('../src/database/database').Database },
  seconds: number,
): Promise<string> {
  const [row] = await sql(
    broker.dataSource,
    `SELECT to_char((now() + make_interval(secs => $1)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`,
    [seconds],
  );
  return row.at;
}

describe('consumer groups', () => {
  const broker = useTestBroker();

  /** "orders": p1 holds 3 messages, p2 holds 2. fast consumed p1; slow holds a live lease on p2. */
  async function twoGroups(client: BrokerClient): Promise<{ slowLease: PopBody }> {
    await client.pushMany('orders', 3, 'p1');
    await client.pushMany('orders', 2, 'p2');
    await client.ackAll(await client.popLeased('orders', { consumerGroup: 'fast' }, 'p1')).expect(200);
    const slowLease = await client.popLeased('orders', { consumerGroup: 'slow', leaseSeconds: 600 }, 'p2');
    return { slowLease };
  }

  describe('GET /api/v1/consumer-groups', () => {
    it('lists each (group, queue) with its lag in messages and seconds, its live leases and its state', async () => {
      const { client, dataSource } = broker;
      await twoGroups(client);
      await ageMessages(dataSource, client.tenant, 120);

      const answer = await groups(client).expect(200);

      expect(answer.body.map((entry: { name: string }) => entry.name)).toEqual(['fast', 'slow']);
      const [fast, slow] = answer.body;
      expect(fast).toMatchObject({
        name: 'fast',
        queueName: 'orders',
        partitions: 2,
        partitionsWithLag: 1,
        totalLag: 2,
        liveLeases: 0,
        subscriptionMode: 'all',
        subscriptionTimestamp: null,
        state: 'Lagging',
      });
      expect(slow).toMatchObject({ partitions: 2, partitionsWithLag: 2, totalLag: 5, liveLeases: 1, state: 'Lagging' });
      for (const entry of answer.body) {
        expect(entry.maxTimeLag).toBeGreaterThanOrEqual(120);
        expect(entry.maxTimeLag).toBeLessThan(120 + 300);
      }
    });

    it('shows a caught-up group as Stable with no lag, and a group subscribed to new messages with its start', async () => {
      const { client } = broker;
      await client.pushMany('events', 2);
      await client.ackAll(await client.popLeased('events', { consumerGroup: 'done', batch: 10 })).expect(200);
      await client.pop('events', { consumerGroup: 'late', subscriptionMode: 'new' }).expect(204);

      const answer = await groups(client, { queue: 'events' }).expect(200);

      expect(answer.body).toHaveLength(2);
      expect(answer.body[0]).toMatchObject({ name: 'done', totalLag: 0, maxTimeLag: 0, state: 'Stable' });
      expect(answer.body[1]).toMatchObject({ name: 'late', subscriptionMode: 'new', totalLag: 0, state: 'Stable' });
      expect(answer.body[1].subscriptionTimestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    });

    it('filters by queue, pages by limit, and refuses an unknown queue or a bad limit', async () => {
      const { client } = broker;
      await twoGroups(client);
      await client.pushMany('other', 1);
      await client.popLeased('other', { consumerGroup: 'aaa' });

      expect((await groups(client, { queue: 'other' }).expect(200)).body.map((g: { name: string }) => g.name)).toEqual([
        'aaa',
      ]);
      expect((await groups(client, { limit: 2 }).expect(200)).body.map((g: { name: string }) => g.name)).toEqual([
        'fast',
        'slow',
      ]);
      expect((await groups(client, { queue: 'nope' })).body).toEqual({ error: 'queue not found' });
      expect((await groups(client, { queue: 'nope' })).status).toBe(404);
      const badLimit = await groups(client, { limit: 0 });
      expect([badLimit.status, badLimit.body]).toEqual([400, { error: 'limit must be an integer between 1 and 1000' }]);
    });
  });

  describe('GET /api/v1/consumer-groups/lagging', () => {
    it('lists the (group, partition) pairs behind by at least minLagSeconds, oldest first, without lease ids', async () => {
      const { client, dataSource } = broker;
      const { slowLease } = await twoGroups(client);
      await ageMessages(dataSource, client.tenant, 600);
      await sql(
        dataSource,
        `UPDATE messages SET created_at = created_at - interval '1 minute'
          WHERE tenant_id = $1 AND transaction_id LIKE 'orders-p1-%'`,
        [client.tenant],
      );
      await client.pushMany('fresh', 1);
      await client.pop('fresh', { consumerGroup: 'fast' }).expect(200);

      const answer = await client.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 300 }).expect(200);

      expect(
        answer.body.map((row: { consumerGroup: string; partition: string }) => `${row.consumerGroup}/${row.partition}`),
      ).toEqual(['slow/p1', 'fast/p2', 'slow/p2']);
      expect(answer.body[2]).toMatchObject({
        consumerGroup: 'slow',
        queueName: 'orders',
        partition: 'p2',
        cursor: 0,
        offsetLag: 2,
        leaseActive: true,
      });
      expect(answer.body[2].timeLagSeconds).toBeGreaterThanOrEqual(600);
      expect(JSON.stringify(answer.body)).not.toContain(slowLease.leaseId);

      const fewer = await client.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 300, limit: 1 }).expect(200);
      expect(fewer.body).toHaveLength(1);
      expect((await client.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 100_000 })).body).toEqual([]);
      const bad = await client.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 'soon' });
      expect([bad.status, bad.body]).toEqual([
        400,
        { error: 'minLagSeconds must be an integer between 0 and 2147483647' },
      ]);
    });
  });

  describe('GET /api/v1/consumer-groups/:group', () => {
    it("shows the group's cursor, lag and lease state per queue and partition, and {} for an unknown group", async () => {
      const { client } = broker;
      const { slowLease } = await twoGroups(client);
      await client.pushMany('other', 1);
      await client.pop('other', { consumerGroup: 'slow', subscriptionMode: 'new' }).expect(204);

      const answer = await client.get('/api/v1/consumer-groups/slow').expect(200);

      expect(Object.keys(answer.body)).toEqual(['orders', 'other']);
      expect(answer.body.orders).toMatchObject({
        subscriptionMode: 'all',
        subscriptionTimestamp: null,
        partitionCount: 2,
      });
      expect(answer.body.orders.partitions).toEqual([
        expect.objectContaining({ partition: 'p1', cursor: 0, offsetLag: 3, leaseActive: false, leaseExpiresAt: null }),
        expect.objectContaining({ partition: 'p2', cursor: 0, offsetLag: 2, leaseActive: true, deliveryAttempt: 1 }),
      ]);
      expect(answer.body.other).toMatchObject({ subscriptionMode: 'new', partitionCount: 1 });
      expect(answer.body.other.partitions[0]).toMatchObject({ cursor: 1, offsetLag: 0, timeLagSeconds: 0 });
      expect(JSON.stringify(answer.body)).not.toContain(slowLease.leaseId);

      expect(Object.keys((await client.get('/api/v1/consumer-groups/slow', { queue: 'other' })).body)).toEqual([
        'other',
      ]);
      expect((await client.get('/api/v1/consumer-groups/nobody').expect(200)).body).toEqual({});
    });
  });

  describe('seek', () => {
    it("to the end skips everything stored, ends the group's live lease there and fences its holder", async () => {
      const { client, dataSource } = broker;
      const { slowLease } = await twoGroups(client);
      const before = await cursors(dataSource, client.tenant, 'orders');

      const answer = await seek(client, 'slow', 'orders', { toEnd: true }).expect(200);

      expect(answer.body).toEqual({ success: true, consumerGroup: 'slow', queueName: 'orders', partitionsUpdated: 2 });
      const stale = slowLease.messages[0];
      const ack = await client
        .ack({
          transactionId: stale.transactionId,
          partitionId: stale.partitionId,
          consumerGroup: 'slow',
          leaseId: slowLease.leaseId,
        })
        .expect(200);
      expect(ack.body[0]).toMatchObject({ success: false, error: 'invalid or expired lease' });
      expect((await client.extend(slowLease.leaseId!, 60).expect(200)).body).toMatchObject({ renewed: 0 });
      await client.pop('orders', { consumerGroup: 'slow' }).expect(204);

      await client.pushMany('orders', 1, 'p2', 'later');
      const next = await client.popLeased('orders', { consumerGroup: 'slow' });
      expect(ids(next)).toEqual(['later-0']);
      const epochBefore = before.find((row) => row.consumerGroup === 'slow' && row.partition === 'p2');
      expect(next.messages[0].leaseEpoch).toBeGreaterThan(slowLease.messages[0].leaseEpoch);
      expect(epochBefore?.leaseLive).toBe(true);
      // fast is untouched.
      expect(ids(await client.popLeased('orders', { consumerGroup: 'fast', batch: 10 }))).toEqual([
        'orders-p2-0',
        'orders-p2-1',
        'later-0',
      ]);
    });

    it('to a timestamp delivers again every message created at or after it', async () => {
      const { client, dataSource } = broker;
      await client.pushMany('log', 3, undefined, 'old');
      // Younger than the default completed retention (1 h): the retention job of another test file, which spans
      // tenants, would delete them once acked.
      await ageMessages(dataSource, client.tenant, 3000);
      await client.pushMany('log', 2, undefined, 'new');
      await client.ackAll(await client.popLeased('log', { consumerGroup: 'g', batch: 10 })).expect(200);
      await client.pop('log', { consumerGroup: 'g' }).expect(204);

      await seek(client, 'g', 'log', { timestamp: await databaseTime(broker, -1800) }).expect(200);
      const replay = await client.popLeased('log', { consumerGroup: 'g', batch: 10 });
      expect(ids(replay)).toEqual(['new-0', 'new-1']);
      expect(replay.messages.map((message) => message.deliveryAttempt)).toEqual([1, 1]);
      await client.ackAll(replay).expect(200);

      await seek(client, 'g', 'log', { timestamp: await databaseTime(broker, -7200) }).expect(200);
      expect(ids(await client.popLeased('log', { consumerGroup: 'g', batch: 10 }))).toHaveLength(5);

      await seek(client, 'g', 'log', { timestamp: await databaseTime(broker, 60) }).expect(200);
      await client.pop('log', { consumerGroup: 'g' }).expect(204);
    });

    it('of one partition moves only that one; unknown queues and partitions are 404', async () => {
      const { client } = broker;
      await twoGroups(client);

      const answer = await seek(client, 'fast', 'orders', { timestamp: '2000-01-01' }, 'p1').expect(200);

      expect(answer.body).toEqual({
        success: true,
        consumerGroup: 'fast',
        queueName: 'orders',
        partition: 'p1',
        partitionsUpdated: 1,
      });
      const detail = (await client.get('/api/v1/consumer-groups/fast')).body.orders.partitions;
      expect(detail.map((row: { cursor: number; offsetLag: number }) => [row.cursor, row.offsetLag])).toEqual([
        [0, 3],
        [0, 2],
      ]);
      const noPartition = await seek(client, 'fast', 'orders', { toEnd: true }, 'p9');
      expect([noPartition.status, noPartition.body]).toEqual([404, { error: 'partition not found' }]);
      const noQueue = await seek(client, 'fast', 'nope', { toEnd: true });
      expect([noQueue.status, noQueue.body]).toEqual([404, { error: 'queue not found' }]);
    });

    it('positions a group that never popped, which then starts there', async () => {
      const { client } = broker;
      await client.pushMany('fresh', 3);

      await seek(client, 'newcomer', 'fresh', { toEnd: true }).expect(200);
      await client.pushMany('fresh', 1, undefined, 'after');

      expect(ids(await client.popLeased('fresh', { consumerGroup: 'newcomer', batch: 10 }))).toEqual(['after-0']);
      expect((await groups(client, { queue: 'fresh' })).body.map((g: { name: string }) => g.name)).toEqual([
        'newcomer',
      ]);
    });

    it('wakes a parked poll of the group when it makes messages claimable again', async () => {
      const { client, app } = broker;
      await client.pushMany('replay', 2);
      await client.ackAll(await client.popLeased('replay', { consumerGroup: 'g', batch: 10 })).expect(200);
      const poll = client.pop('replay', { consumerGroup: 'g', wait: true, timeout: 30_000, batch: 10 }).then((r) => r);
      const parked = app.get(ParkedPolls);
      await waitFor(() => parked.parkedCount(client.tenant, 'replay', 'g') === 1, 'the poll parks');

      await seek(client, 'g', 'replay', { timestamp: '2000-01-01T00:00:00Z' }).expect(200);

      const answer = await within(poll, 'the parked poll answers', 10_000);
      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toEqual(['replay-Default-0', 'replay-Default-1']);
    });

    it.each([
      [{}, 'toEnd must be true, or a timestamp must be given'],
      [{ toEnd: false }, 'toEnd must be true'],
      [{ toEnd: 'yes' }, 'toEnd must be true'],
      [{ toEnd: true, timestamp: '2026-01-01T00:00:00Z' }, 'toEnd and timestamp cannot both be given'],
      [{ timestamp: 'yesterday' }, 'timestamp must be an ISO-8601 timestamp'],
      [{ timestamp: 1700000000 }, 'timestamp must be an ISO-8601 timestamp'],
      [[], 'request body must be a JSON object'],
    ])('refuses %j with 400 and changes nothing', async (body, error) => {
      const { client, dataSource } = broker;
      await twoGroups(client);
      const before = await cursors(dataSource, client.tenant, 'orders');

      const answer = await seek(client, 'slow', 'orders', body);

      expect([answer.status, answer.body]).toEqual([400, { error }]);
      expect(await cursors(dataSource, client.tenant, 'orders')).toEqual(before);
    });
  });

  describe('delete', () => {
    it("on one queue forgets the group's cursors and leases there; its next pop starts afresh", async () => {
      const { client, dataSource } = broker;
      const { slowLease } = await twoGroups(client);
      await client.pushMany('other', 1);
      await client.ackAll(await client.popLeased('other', { consumerGroup: 'slow' })).expect(200);

      const answer = await client.delete('/api/v1/consumer-groups/slow/queues/orders').expect(200);

      expect(answer.body).toEqual({ success: true, consumerGroup: 'slow', queueName: 'orders', deletedPartitions: 2 });
      const stale = slowLease.messages[0];
      const ack = await client
        .ack({
          transactionId: stale.transactionId,
          partitionId: stale.partitionId,
          consumerGroup: 'slow',
          leaseId: slowLease.leaseId,
        })
        .expect(200);
      expect(ack.body[0]).toMatchObject({ success: false, error: 'invalid or expired lease' });
      expect((await client.extend(slowLease.leaseId!, 60)).body).toMatchObject({ renewed: 0 });
      expect(Object.keys((await client.get('/api/v1/consumer-groups/slow')).body)).toEqual(['other']);
      expect((await cursors(dataSource, client.tenant, 'orders')).map((row) => row.consumerGroup)).not.toContain(
        'slow',
      );

      const again = await client.popLeased('orders', { consumerGroup: 'slow', batch: 10 }, 'p2');
      expect(ids(again)).toEqual(['orders-p2-0', 'orders-p2-1']);
      expect(again.leaseId).not.toBe(slowLease.leaseId);
    });

    it('everywhere forgets every queue; an unknown group answers 0', async () => {
      const { client } = broker;
      await twoGroups(client);
      await client.pushMany('other', 1);
      await client.popLeased('other', { consumerGroup: 'slow' });

      expect((await client.delete('/api/v1/consumer-groups/slow').expect(200)).body).toEqual({
        success: true,
        consumerGroup: 'slow',
        deletedPartitions: 3,
      });
      expect((await client.get('/api/v1/consumer-groups/slow')).body).toEqual({});
      expect((await groups(client)).body.map((g: { name: string }) => g.name)).toEqual(['fast']);
      expect((await client.delete('/api/v1/consumer-groups/slow').expect(200)).body.deletedPartitions).toBe(0);
      expect((await client.delete('/api/v1/consumer-groups/ghost/queues/nope').expect(200)).body).toEqual({
        success: true,
        consumerGroup: 'ghost',
        queueName: 'nope',
        deletedPartitions: 0,
      });
    });

    it('wakes a parked poll of the group, which starts afresh', async () => {
      const { client, app } = broker;
      await client.pushMany('restart', 2);
      await client.ackAll(await client.popLeased('restart', { consumerGroup: 'g', batch: 10 })).expect(200);
      const poll = client.pop('restart', { consumerGroup: 'g', wait: true, timeout: 30_000, batch: 10 }).then((r) => r);
      await waitFor(() => app.get(ParkedPolls).parkedCount(client.tenant, 'restart', 'g') === 1, 'the poll parks');

      await client.delete('/api/v1/consumer-groups/g').expect(200);

      const answer = await within(poll, 'the parked poll answers', 10_000);
      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toEqual(['restart-Default-0', 'restart-Default-1']);
    });
  });

  // Lock order against acks, dead letters, pushes creating partitions and claims: real PostgreSQL only.
  (onEmbeddedDatabase ? describe.skip : describe)('under load, on real PostgreSQL', () => {
    it('seeks and deletes while workers pop, ack, dead-letter and push: no request fails', async () => {
      const { client } = broker;
      await client.configure({ queue: 'busy', options: { retryLimit: 0 } }).expect(200);
      const statuses: number[] = [];
      const record = (status: number) => statuses.push(status);
      let running = true;
      let pushed = 0;

      const pusher = (async () => {
        while (running) {
          const items = Array.from({ length: 10 }, (_, n) => ({
            queue: 'busy',
            partition: `p${(pushed + n) % 20}`,
            payload: n,
          }));
          pushed += 10;
          record((await client.push(items)).status);
        }
      })();
      const workers = Array.from({ length: 4 }, async (_, worker) => {
        while (running) {
          const popped = await client.pop('busy', { consumerGroup: 'g', batch: 5, leaseSeconds: 30 });
          record(popped.status);
          if (popped.status !== 200) continue;
          record((await client.ackAll(popped.body, worker === 0 ? 'failed' : 'completed')).status);
        }
      });
      const admin = (async () => {
        const moves = [
          () => seek(client, 'g', 'busy', { timestamp: '2000-01-01T00:00:00Z' }),
          () => seek(client, 'g', 'busy', { toEnd: true }),
          () => seek(client, 'g', 'busy', { timestamp: '2000-01-01T00:00:00Z' }, 'p3'),
          () => client.delete('/api/v1/consumer-groups/g/queues/busy'),
          () => client.delete('/api/v1/consumer-groups/g'),
        ];
        for (let round = 0; round < 100; round += 1) record((await moves[round % moves.length]()).status);
      })();

      await admin;
      running = false;
      await Promise.all([pusher, ...workers]);

      expect(statuses.filter((status) => ![200, 201, 204].includes(status))).toEqual([]);
      expect(statuses.filter((status) => status === 200).length).toBeGreaterThan(40);
    }, 120_000);
  });

  describe('tenancy', () => {
    it("another tenant's groups and queues behave as unknown, and its calls change nothing of the owner's", async () => {
      const { client: owner, app, dataSource } = broker;
      const { slowLease } = await twoGroups(owner);
      const stranger = new BrokerClient(app, newTenant());
      const before = await cursors(dataSource, owner.tenant, 'orders');

      expect((await groups(stranger)).body).toEqual([]);
      expect((await stranger.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 0 })).body).toEqual([]);
      expect((await stranger.get('/api/v1/consumer-groups/slow')).body).toEqual({});
      expect((await seek(stranger, 'slow', 'orders', { toEnd: true })).status).toBe(404);
      expect((await stranger.delete('/api/v1/consumer-groups/slow')).body.deletedPartitions).toBe(0);
      expect((await stranger.delete('/api/v1/consumer-groups/slow/queues/orders')).body.deletedPartitions).toBe(0);

      expect(await cursors(dataSource, owner.tenant, 'orders')).toEqual(before);
      expect((await owner.extend(slowLease.leaseId!, 60)).body).toMatchObject({ renewed: 1 });
    });
  });
});
