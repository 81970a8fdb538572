import { HistoryRecorder } from '../src/history/history-recorder';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';

interface Point {
  at: string;
  pushed: number;
  popped: number;
  acked: number;
  deadLettered: number;
  maxWaitSeconds: number | null;
  lag?: number | null;
}

const sum = (points: Point[], key: 'pushed' | 'popped' | 'acked' | 'deadLettered') =>
  points.reduce((total, point) => total + point[key], 0);

/** The console's history: minute buckets written from the counts push, pop and ack keep, read by range. */
describe('queue and tenant history', () => {
  // Flushed by the tests alone: a timer's flush between two reads would move counts under them.
  const broker = useTestBroker({ HISTORY_FLUSH_MS: '3600000' });
  const flush = () => broker.app.get(HistoryRecorder).flush();
  const history = async (client: BrokerClient, queue?: string, range?: string) =>
    (
      await client
        .get(queue === undefined ? '/api/v1/resources/history' : `/api/v1/resources/queues/${queue}/history`, {
          ...(range === undefined ? {} : { range }),
        })
        .expect(200)
    ).body;

  /** Writes a queue's bucket (and its tenant's) `minutesAgo` minutes before the database's current minute. */
  const writeBucket = async (
    tenant: string,
    queue: string,
    minutesAgo: number,
    counts: { pushed: number; lag: number },
  ) => {
    const minute = `date_trunc('minute', now()) - make_interval(mins => $3)`;
    await sql(
      broker.dataSource,
      `INSERT INTO queue_history (tenant_id, queue_id, minute, pushed, lag)
       SELECT $1, id, ${minute}, $4, $5 FROM queues WHERE tenant_id = $1 AND name = $2`,
      [tenant, queue, minutesAgo, counts.pushed, counts.lag],
    );
    await sql(
      broker.dataSource,
      `INSERT INTO tenant_history (tenant_id, minute, pushed) VALUES ($1, ${minute.replace('$3', '$2')}, $3)`,
      [tenant, minutesAgo, counts.pushed],
    );
  };

  it('shows what was pushed, popped, acked and dead-lettered, the longest wait and the lag, once flushed', async () => {
    const { client } = broker;
    await client.configure({ queue: 'orders', options: { retryLimit: 0, deadLetterQueue: true } }).expect(200);
    await client.pushMany('orders', 5);
    await ageMessages(broker.dataSource, client.tenant, 90);
    const popped = await client.popLeased('orders', { batch: 3 });
    const acked = await client
      .ackBatch({
        acknowledgments: ['completed', 'failed'].map((status, index) => ({
          transactionId: popped.messages[index].transactionId,
          partitionId: popped.messages[index].partitionId,
          leaseId: popped.leaseId,
          status,
        })),
      })
      .expect(200);
    expect(acked.body.map((result: { dlq: boolean }) => result.dlq)).toEqual([false, true]);

    const before = await history(client, 'orders');
    expect(sum(before.points, 'pushed')).toBe(0);
    await flush();
    const after = await history(client, 'orders');

    expect(after).toMatchObject({ queue: 'orders', range: 'hour', stepSeconds: 60 });
    expect(after.points).toHaveLength(60);
    expect(Date.parse(after.to) - Date.parse(after.from)).toBe(3_600_000);
    expect(after.points[0].at).toBe(after.from);
    expect(Date.parse(after.points[59].at)).toBe(Date.parse(after.to) - 60_000);
    expect(sum(after.points, 'pushed')).toBe(5);
    expect(sum(after.points, 'popped')).toBe(3);
    expect(sum(after.points, 'acked')).toBe(1);
    expect(sum(after.points, 'deadLettered')).toBe(1);
    const waits = after.points
      .map((point: Point) => point.maxWaitSeconds)
      .filter((wait: number | null) => wait !== null);
    expect(Math.max(...waits)).toBeGreaterThanOrEqual(90);
    // Two of five consumed (the acked one and the dead letter's): three waiting, on every step since.
    const active = after.points.findIndex((point: Point) => point.pushed > 0);
    expect(after.points.slice(0, active).every((point: Point) => point.lag === null)).toBe(true);
    expect(after.points.at(-1).lag).toBe(3);

    const tenant = await history(client);
    expect(tenant).toMatchObject({ range: 'hour', stepSeconds: 60 });
    expect(tenant.points).toHaveLength(60);
    expect(tenant.points[0]).not.toHaveProperty('lag');
    expect([sum(tenant.points, 'pushed'), sum(tenant.points, 'popped'), sum(tenant.points, 'acked')]).toEqual([
      5, 3, 1,
    ]);
  });

  it("adds each flush to the minute's counts and keeps tenants apart", async () => {
    const { client } = broker;
    await client.pushMany('adds', 2, undefined, 'first');
    await flush();
    await client.pushMany('adds', 3, undefined, 'second');
    await client.pushAndPop('adds', 1, { autoAck: 'true' });
    await flush();

    const points = (await history(client, 'adds')).points;
    // An autoAck pop is delivered and consumed at once.
    expect([sum(points, 'pushed'), sum(points, 'popped'), sum(points, 'acked')]).toEqual([6, 6, 6]);
    const stranger = new BrokerClient(broker.app, newTenant());
    expect(sum((await history(stranger)).points, 'pushed')).toBe(0);
    await stranger.get('/api/v1/resources/queues/adds/history').expect(404, { error: 'queue not found' });
  });

  it('sums a day in five-minute steps and a week in hours, and carries the lag from before the range', async () => {
    const { client } = broker;
    await client.configure({ queue: 'older', options: {} }).expect(200);
    await writeBucket(client.tenant, 'older', 120, { pushed: 4, lag: 7 });
    await writeBucket(client.tenant, 'older', 122, { pushed: 6, lag: 8 });
    await writeBucket(client.tenant, 'older', 60 * 30, { pushed: 10, lag: 9 });

    const hour = await history(client, 'older', 'hour');
    expect(sum(hour.points, 'pushed')).toBe(0);
    expect(hour.points.map((point: Point) => point.lag)).toEqual(Array(60).fill(7));

    const day = await history(client, 'older', 'day');
    expect(day).toMatchObject({ range: 'day', stepSeconds: 300 });
    expect(day.points).toHaveLength(288);
    // Steps end with the current minute: 120 and 122 minutes before it share one; 30 hours ago is not this day.
    expect(day.points.filter((point: Point) => point.pushed > 0).map((point: Point) => point.pushed)).toEqual([10]);

    const week = await history(client, 'older', 'week');
    expect(week).toMatchObject({ range: 'week', stepSeconds: 3600 });
    expect(week.points).toHaveLength(168);
    expect(sum(week.points, 'pushed')).toBe(20);
    expect(sum((await history(client, undefined, 'week')).points, 'pushed')).toBe(20);
  });

  it('refuses a range it does not know and a bad queue name', async () => {
    const { client } = broker;
    await client.get('/api/v1/resources/history', { range: 'year' }).expect(400, {
      error: 'range must be one of hour, day, week',
    });
    await client.get('/api/v1/resources/queues/x/history?range=hour&range=day').expect(400);
    await client.get('/api/v1/resources/history', { since: 'yesterday' }).expect(400);
  });

  it("goes with its queue, while the tenant's record stays", async () => {
    const { client } = broker;
    await client.pushMany('doomed', 2);
    await flush();

    await client.delete('/api/v1/resources/queues/doomed').expect(200);

    const [rows] = await sql(broker.dataSource, 'SELECT count(*)::int AS n FROM queue_history WHERE tenant_id = $1', [
      client.tenant,
    ]);
    expect(rows.n).toBe(0);
    expect(sum((await history(client)).points, 'pushed')).toBe(2);
  });

  it('is deleted by the retention job past HISTORY_RETENTION_DAYS, the rest kept', async () => {
    const { client } = broker;
    await client.configure({ queue: 'aging', options: {} }).expect(200);
    await writeBucket(client.tenant, 'aging', 8 * 24 * 60, { pushed: 1, lag: 1 });
    await writeBucket(client.tenant, 'aging', 6 * 24 * 60, { pushed: 2, lag: 1 });

    const round = await broker.app.get(RetentionService).runOnce([client.tenant]);

    expect(round.deleted.history).toBe(2);
    const kept = await sql(
      broker.dataSource,
      `SELECT 'queue' AS of, pushed::int FROM queue_history WHERE tenant_id = $1
       UNION ALL SELECT 'tenant', pushed::int FROM tenant_history WHERE tenant_id = $1 ORDER BY 1`,
      [client.tenant],
    );
    expect(kept).toEqual([
      { of: 'queue', pushed: 2 },
      { of: 'tenant', pushed: 2 },
    ]);
  });
});
