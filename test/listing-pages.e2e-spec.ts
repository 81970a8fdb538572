import { BrokerClient } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { useTestBroker } from './support/test-broker';

type Entry = Record<string, unknown>;

/** Every page of a listing answering a bare array, following X-Next-After; `between` runs after each page. */
async function allPages(
  client: BrokerClient,
  path: string,
  query: Record<string, string | number>,
  between: (page: number) => Promise<void> = async () => undefined,
): Promise<{ entries: Entry[]; pages: number }> {
  const entries: Entry[] = [];
  let after: string | undefined;
  for (let page = 1; page <= 100; page += 1) {
    const answer = await client.get(path, after === undefined ? query : { ...query, after }).expect(200);
    entries.push(...(Array.isArray(answer.body) ? (answer.body as Entry[]) : [answer.body]));
    after = answer.headers['x-next-after'];
    if (after === undefined) return { entries, pages: page };
    await between(page);
  }
  throw new Error(`${path}: more than 100 pages`);
}

const pairs = (entries: Entry[]) => entries.map((entry) => `${String(entry.consumerGroup)}/${String(entry.partition)}`);

describe('listing pages', () => {
  const broker = useTestBroker();

  describe('GET /api/v1/consumer-groups', () => {
    it('pages by queue then group name; groups made or forgotten meanwhile never repeat nor hide the others', async () => {
      const { client } = broker;
      await client.pushMany('a-queue', 1);
      await client.pushMany('b-queue', 1);
      for (const group of ['g1', 'g3', 'g5']) {
        await client.pop('a-queue', { consumerGroup: group }).expect(200);
        await client.pop('b-queue', { consumerGroup: group }).expect(200);
      }

      const { entries, pages } = await allPages(client, '/api/v1/consumer-groups', { limit: 2 }, async (page) => {
        // Before and after the position reached: a group new since the listing began may or may not show.
        await client.pop('a-queue', { consumerGroup: `g${page * 2}` });
        await client.pop('b-queue', { consumerGroup: 'g0' });
        if (page === 1) await client.delete('/api/v1/consumer-groups/g1/queues/b-queue').expect(200);
      });

      const listed = entries.map((entry) => `${String(entry.queueName)}/${String(entry.name)}`);
      expect(new Set(listed).size).toBe(listed.length);
      for (const kept of ['a-queue/g1', 'a-queue/g3', 'a-queue/g5', 'b-queue/g3', 'b-queue/g5']) {
        expect(listed).toContain(kept);
      }
      expect([...listed].sort()).toEqual(listed);
      expect(pages).toBeGreaterThanOrEqual(3);
      expect(entries[0]).toMatchObject({ queueName: 'a-queue', name: 'g1', partitions: 1, totalLag: 1 });
    });

    it('counts what each group still looking through has not reached from its own start, when several start alike', async () => {
      const { client, dataSource } = broker;
      for (let n = 1; n <= 3; n += 1) await client.pushMany('orders', 1, `p${n}`);
      await ageMessages(dataSource, client.tenant, 600);
      const [{ between }] = await sql(dataSource, `SELECT now() - interval '300 seconds' AS between`);
      for (let n = 1; n <= 3; n += 1) await client.pushMany('orders', 1, `p${n}`, `orders-p${n}-later`);
      // "a" and "b" start alike, from everything stored; "c" starts between the two pushes. None has a cursor.
      for (const [group, timestamp] of [
        ['a', '2020-01-01T00:00:00Z'],
        ['b', '2020-01-01T00:00:00Z'],
        ['c', (between as Date).toISOString()],
      ]) {
        await client.post(`/api/v1/consumer-groups/${group}/queues/orders/seek`, { timestamp }).expect(200);
      }

      const answer = await client.get('/api/v1/consumer-groups', { queue: 'orders' }).expect(200);

      const totals = Object.fromEntries(
        (answer.body as Entry[]).map((entry) => [entry.name, [entry.totalLag, entry.partitionsWithLag]]),
      );
      expect(totals).toEqual({ a: [6, 3], b: [6, 3], c: [3, 3] });
    });

    it('refuses a page cursor it did not make', async () => {
      const { client } = broker;
      await client
        .get('/api/v1/consumer-groups', { after: 'not-a-cursor' })
        .expect(400, { error: 'after is not a page cursor' });
      await client
        .get('/api/v1/consumer-groups/lagging', { after: Buffer.from('["r","x"]').toString('base64url') })
        .expect(400, { error: 'after is not a page cursor' });
    });
  });

  describe('GET /api/v1/consumer-groups/lagging', () => {
    /** p1..p5 of "orders" hold two messages each, aged ten minutes. */
    async function agedPartitions(client: BrokerClient): Promise<void> {
      for (let n = 1; n <= 5; n += 1) await client.pushMany('orders', 2, `p${n}`);
      await ageMessages(broker.dataSource, client.tenant, 600);
    }

    it('walks the cursors that have work, and the partitions a group still looking through has not reached', async () => {
      const { client, dataSource } = broker;
      await agedPartitions(client);
      // "reader" drained p1; it looked through the others (cursors where there is work), and p6's push made one.
      await client.ackAll(await client.popLeased('orders', { consumerGroup: 'reader', batch: 10 }, 'p1')).expect(200);
      await client.pushMany('orders', 1, 'p6');
      await ageMessages(dataSource, client.tenant, 600);
      // "replay" went back in time: no cursor anywhere yet, still looking through every partition.
      await client.post('/api/v1/consumer-groups/replay/queues/orders/seek', { timestamp: '2020-01-01T00:00:00Z' });
      const [{ backfilling, cursors }] = await sql(
        dataSource,
        `SELECT g.backfill_from IS NOT NULL AS backfilling,
                (SELECT count(*)::int FROM consumers c
                  WHERE c.tenant_id = g.tenant_id AND c.consumer_group = g.name) AS cursors
           FROM consumer_groups g WHERE g.tenant_id = $1 AND g.name = 'replay'`,
        [client.tenant],
      );
      expect({ backfilling, cursors }).toEqual({ backfilling: true, cursors: 0 });

      const whole = await client.get('/api/v1/consumer-groups/lagging', { minLagSeconds: 300 }).expect(200);
      const expected = [
        ...['p2', 'p3', 'p4', 'p5', 'p6'].map((partition) => `reader/${partition}`),
        ...['p1', 'p2', 'p3', 'p4', 'p5', 'p6'].map((partition) => `replay/${partition}`),
      ].sort();
      expect(pairs(whole.body as Entry[]).sort()).toEqual(expected);
      expect(whole.headers['x-next-after']).toBeUndefined();
      const replayP1 = (whole.body as Entry[]).find(
        (entry) => entry.consumerGroup === 'replay' && entry.partition === 'p1',
      );
      expect(replayP1).toMatchObject({ queueName: 'orders', cursor: 0, offsetLag: 2, leaseActive: false });

      // A page at a time, while the reader drains p2 and a new partition gets work: nothing listed twice.
      const { entries, pages } = await allPages(
        client,
        '/api/v1/consumer-groups/lagging',
        { minLagSeconds: 300, limit: 2 },
        async (page) => {
          if (page === 1) {
            await client
              .ackAll(await client.popLeased('orders', { consumerGroup: 'reader', batch: 10 }, 'p2'))
              .expect(200);
            await client.pushMany('orders', 1, 'p7');
          }
        },
      );
      const listed = pairs(entries);
      expect(pages).toBeGreaterThanOrEqual(5);
      expect(new Set(listed).size).toBe(listed.length);
      for (const kept of expected.filter((pair) => pair !== 'reader/p2')) expect(listed).toContain(kept);
    });
  });

  describe('GET /api/v1/consumer-groups/:group', () => {
    it("pages a group's partitions by queue then partition name", async () => {
      const { client } = broker;
      for (const queue of ['q1', 'q2']) {
        for (let n = 1; n <= 3; n += 1) await client.pushMany(queue, 1, `p${n}`);
        await client.pop(queue, { consumerGroup: 'g' }).expect(200);
      }

      const { entries, pages } = await allPages(client, '/api/v1/consumer-groups/g', { limit: 2 });

      const listed = entries.flatMap((page) =>
        Object.entries(
          page as Record<string, { partitionCount: number; partitions: Array<{ partition: string }> }>,
        ).flatMap(([queue, detail]) => {
          expect(detail.partitionCount).toBe(3);
          return detail.partitions.map((partition) => `${queue}/${partition.partition}`);
        }),
      );
      expect(listed).toEqual(['q1/p1', 'q1/p2', 'q1/p3', 'q2/p1', 'q2/p2', 'q2/p3']);
      expect(pages).toBe(3);
    });
  });

  describe('GET /api/v1/resources/queues/:queue', () => {
    it('pages partitions by name with partitionsNext, each group covering every partition in its totals', async () => {
      const { client } = broker;
      for (let n = 1; n <= 5; n += 1) await client.pushMany('orders', 1, `p${n}`);
      await client.pop('orders', { consumerGroup: 'g' }).expect(200);

      const names: string[] = [];
      let after: string | undefined;
      for (let page = 0; page < 3; page += 1) {
        const answer = await client
          .get('/api/v1/resources/queues/orders', after === undefined ? { limit: 2 } : { limit: 2, after })
          .expect(200);
        names.push(...(answer.body.partitions as Array<{ name: string }>).map((partition) => partition.name));
        expect(answer.body.partitionCount).toBe(5);
        expect(answer.body.partitionsTruncated).toBe(true);
        const [group] = answer.body.consumerGroups as Array<{ name: string; lag: number; partitions: unknown[] }>;
        expect(group).toMatchObject({ name: 'g', lag: 5 });
        expect(group.partitions).toHaveLength(answer.body.partitions.length);
        after = answer.body.partitionsNext ?? undefined;
      }
      expect(names).toEqual(['p1', 'p2', 'p3', 'p4', 'p5']);
      expect(after).toBeUndefined();
    });
  });
});
