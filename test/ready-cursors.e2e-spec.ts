import { Client } from 'pg';
import { Database } from '../src/database/database';
import { BrokerClient, PopBody } from './support/broker-client';
import { RetentionService } from '../src/retention/retention.service';
import { ageMessages, sql } from './support/db-state';
import { openSession } from './support/pg-session';
import { onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitForLockWaiter, within } from './support/wait';

const ids = (body: PopBody) => body.messages.map((message) => message.transactionId);

/** The group's cursors in the tenant: how many, and how many are marked as maybe having work. */
async function cursorCount(
  dataSource: Database,
  tenant: string,
  group: string,
): Promise<{ all: number; ready: number }> {
  const [row] = await sql(
    dataSource,
    `SELECT count(*)::int AS all, count(*) FILTER (WHERE ready)::int AS ready
       FROM consumers WHERE tenant_id = $1 AND consumer_group = $2`,
    [tenant, group],
  );
  return row;
}

/** Pops and acks until the group finds nothing, answering every transaction id it was given, in order per partition. */
async function drain(client: BrokerClient, queue: string, group: string): Promise<string[]> {
  const seen: string[] = [];
  for (;;) {
    const answer = await client.pop(queue, { consumerGroup: group, batch: 100, partitions: 100 });
    if (answer.status === 204) return seen;
    expect(answer.status).toBe(200);
    seen.push(...ids(answer.body));
    await client.ackAll(answer.body).expect(200);
  }
}

describe('cursors made when first needed, and claims that skip drained partitions', () => {
  const broker = useTestBroker();

  it('starts a group on a queue of 2,500 partitions without a cursor per partition, and it still reads every message once', async () => {
    const { client, dataSource } = broker;
    const items = Array.from({ length: 2_500 }, (_, n) => ({
      queue: 'wide',
      partition: `p${String(n).padStart(4, '0')}`,
      payload: n,
      transactionId: `m${n}`,
    }));
    await client.push(items).expect(201);

    const first = await client.pop('wide', { consumerGroup: 'reader' });
    expect(first.status).toBe(200);
    // One step through the partitions, not all of them.
    expect((await cursorCount(dataSource, client.tenant, 'reader')).all).toBeLessThanOrEqual(1_000);
    await client.ackAll(first.body).expect(200);

    const all = [...ids(first.body), ...(await drain(client, 'wide', 'reader'))];
    expect(all.sort()).toEqual(items.map((item) => item.transactionId).sort());
    // Drained, every cursor is unmarked: the next claim looks at none of them.
    expect(await cursorCount(dataSource, client.tenant, 'reader')).toEqual({ all: 2_500, ready: 0 });
    await client.pop('wide', { consumerGroup: 'reader' }).expect(204);
  });

  it('gives a group that starts now a cursor only where messages come after it started', async () => {
    const { client, dataSource } = broker;
    await client
      .push(Array.from({ length: 300 }, (_, n) => ({ queue: 'later', partition: `q${n}`, payload: n })))
      .expect(201);
    await client.pop('later', { consumerGroup: 'fresh', subscriptionMode: 'new' }).expect(204);
    expect((await cursorCount(dataSource, client.tenant, 'fresh')).all).toBe(0);

    await client
      .push(
        ['q1', 'q7', 'q99'].map((partition) => ({
          queue: 'later',
          partition,
          payload: 'new',
          transactionId: partition,
        })),
      )
      .expect(201);
    expect((await cursorCount(dataSource, client.tenant, 'fresh')).all).toBe(3);
    expect((await drain(client, 'later', 'fresh')).sort()).toEqual(['q1', 'q7', 'q99']);
  });

  it('marks a drained cursor again when a push comes, and a pop of the partition by name makes its cursor', async () => {
    const { client, dataSource } = broker;
    await client.pushMany('lanes', 2, 'a');
    expect(await drain(client, 'lanes', 'g')).toHaveLength(2);
    expect(await cursorCount(dataSource, client.tenant, 'g')).toEqual({ all: 1, ready: 0 });

    await client.pushMany('lanes', 1, 'a', 'again');
    expect(await cursorCount(dataSource, client.tenant, 'g')).toEqual({ all: 1, ready: 1 });
    expect(await drain(client, 'lanes', 'g')).toEqual(['again-0']);

    // A partition the group never read: popped by name, it gets its cursor then and there.
    await client.pushMany('lanes', 2, 'b');
    const named = await client.popLeased('lanes', { consumerGroup: 'other', batch: 10 }, 'b');
    expect(ids(named)).toEqual(['lanes-b-0', 'lanes-b-1']);
  });

  it('replays from an instant across partitions the group has no cursor on', async () => {
    const { client, dataSource } = broker;
    await client.pushMany('replay', 2, 'x');
    await client.pushMany('replay', 2, 'y');
    const [{ at }] = await sql(
      dataSource,
      `SELECT to_char(min(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at FROM messages WHERE tenant_id = $1`,
      [client.tenant],
    );
    // "new" from now: nothing to read, and no cursor anywhere.
    await client.pop('replay', { consumerGroup: 'audit', subscriptionMode: 'new' }).expect(204);
    expect((await cursorCount(dataSource, client.tenant, 'audit')).all).toBe(0);

    const sought = await client.post('/api/v1/consumer-groups/audit/queues/replay/seek', { timestamp: at }).expect(200);
    expect(sought.body).toMatchObject({ partitionsUpdated: 2 });
    expect((await drain(client, 'replay', 'audit')).sort()).toEqual([
      'replay-x-0',
      'replay-x-1',
      'replay-y-0',
      'replay-y-1',
    ]);
  });

  it('refuses an ack without lease from a group that never read the partition', async () => {
    const { client } = broker;
    await client.pushMany('strict', 1);
    const popped = await client.popLeased('strict');
    const answer = await client
      .ack({
        transactionId: popped.messages[0].transactionId,
        partitionId: popped.messages[0].partitionId,
        consumerGroup: 'stranger',
      })
      .expect(200);
    expect(answer.body[0]).toMatchObject({
      success: false,
      error: 'message has not been delivered to this consumer group',
    });
  });
});

// Row locks held by another session: real PostgreSQL only.
(onEmbeddedDatabase ? describe.skip : describe)(
  'a cursor unmarked only while no push can be adding to its partition',
  () => {
    const broker = useTestBroker();
    let blocker: Client;
    let observer: Client;

    beforeAll(async () => {
      blocker = await openSession();
      observer = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await observer.end();
    });

    it('leaves the cursor marked when the ack that drains it finds a push holding the partition, and the push is read', async () => {
      const { client, dataSource } = broker;
      await client.pushMany('race', 1, 'p');
      const popped = await client.popLeased('race', {}, 'p');
      // A push's lock on the partition, as a push in flight holds it while it stores and marks.
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM partitions WHERE tenant_id = $1 FOR NO KEY UPDATE', [client.tenant]);
      let pushed: Promise<{ status: number }> | undefined;
      try {
        await client.ackAll(popped).expect(200);
        expect(await cursorCount(dataSource, client.tenant, '__QUEUE_MODE__')).toEqual({ all: 1, ready: 1 });
        pushed = client.push([{ queue: 'race', partition: 'p', payload: 2, transactionId: 'second' }]).then((r) => r);
        await waitForLockWaiter(observer, 'AS t(queue_name, name)');
      } finally {
        await blocker.query('ROLLBACK');
      }
      expect((await within(pushed, 'the push')).status).toBe(201);
      expect(ids(await client.popLeased('race', {}, 'p'))).toEqual(['second']);
    });

    it('loses no message while pushes and draining acks race on one partition', async () => {
      const { client } = broker;
      const sent: string[] = [];
      const received: string[] = [];
      let pushing = true;
      const producer = (async () => {
        for (let n = 0; n < 150; n += 1) {
          await client.push([{ queue: 'racing', partition: 'only', payload: n, transactionId: `r${n}` }]).expect(201);
          sent.push(`r${n}`);
        }
        pushing = false;
      })();
      const consumer = (async () => {
        while (pushing || received.length < sent.length) {
          const answer = await client.pop('racing', { batch: 5, wait: true, timeout: 1000 }, 'only');
          if (answer.status === 204) continue;
          received.push(...ids(answer.body));
          await client.ackAll(answer.body).expect(200);
        }
      })();
      await within(Promise.all([producer, consumer]), 'every message pushed is read', 60_000);
      expect(received).toEqual(sent);
    });
  },
);

describe('retention and a group still looking through its partitions', () => {
  const broker = useTestBroker();

  it('keeps what such a group has not read yet, on partitions it has not reached, and it reads every message once', async () => {
    const { app, client, dataSource } = broker;
    await client.configure({ queue: 'kept', options: { completedRetentionSeconds: 1 } }).expect(200);
    const items = Array.from({ length: 1_500 }, (_, n) => ({
      queue: 'kept',
      partition: `k${String(n).padStart(4, '0')}`,
      payload: n,
      transactionId: `t${n}`,
    }));
    await client.push(items).expect(201);
    // The first group reads everything: by its cursors alone, every message is consumed.
    expect(await drain(client, 'kept', 'first')).toHaveLength(1_500);
    // The second starts from the beginning and takes one step: it has not reached most partitions.
    const started = await client.popLeased('kept', { consumerGroup: 'second' });
    await client.ackAll(started).expect(200);
    expect((await cursorCount(dataSource, client.tenant, 'second')).all).toBeLessThan(1_500);

    await ageMessages(dataSource, client.tenant, 5);
    await sql(dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
      client.tenant,
    ]);
    // Rounds until the job has looked at every partition of this tenant: it schedules each one it looked at.
    for (let round = 0; round < 50; round += 1) {
      await app.get(RetentionService).runOnce([client.tenant]);
      const [{ unseen }] = await sql(
        dataSource,
        `SELECT count(*)::int AS unseen FROM partitions WHERE tenant_id = $1 AND retention_check_at = '-infinity'`,
        [client.tenant],
      );
      if (unseen === 0) break;
    }

    const rest = await drain(client, 'kept', 'second');
    expect([...ids(started), ...rest].sort()).toEqual(items.map((item) => item.transactionId).sort());
  });
});
