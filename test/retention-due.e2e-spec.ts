import request from 'supertest';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { DatabaseTimeoutError } from '../src/common/database-errors';
import { RetentionRepository } from '../src/retention/retention.repository';
import { RetentionService } from '../src/retention/retention.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { REDELIVERY_CHANNEL } from '../src/wakeup/wakeup-channel';
import { Client } from 'pg';
import { BrokerClient, PopBody } from './support/broker-client';
import { sql } from './support/db-state';
import { onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';

/** Time passes for the tenant: its messages, dead letters, pushes and retention checks are `seconds` older. */
async function passTime(dataSource: Database, tenant: string, seconds: number): Promise<void> {
  for (const statement of [
    `UPDATE messages SET created_at = created_at - make_interval(secs => $2) WHERE tenant_id = $1`,
    `UPDATE dead_letters SET created_at = created_at - make_interval(secs => $2) WHERE tenant_id = $1`,
    `UPDATE partitions SET last_pushed_at = last_pushed_at - make_interval(secs => $2),
                           retention_check_at = retention_check_at - make_interval(secs => $2)
      WHERE tenant_id = $1`,
  ]) {
    await sql(dataSource, statement, [tenant, seconds]);
  }
}

async function kept(dataSource: Database, tenant: string): Promise<string[]> {
  const rows: Array<{ transaction_id: string }> = await sql(
    dataSource,
    'SELECT transaction_id FROM messages WHERE tenant_id = $1 ORDER BY partition_id, seq',
    [tenant],
  );
  return rows.map((row) => row.transaction_id);
}

interface PartitionState {
  name: string;
  /** Seconds from the oldest message's push to the partition's next retention look; null: none set. */
  checkAfterPush: number | null;
  /** The check is due now. */
  due: boolean;
}

async function partitions(dataSource: Database, tenant: string): Promise<PartitionState[]> {
  const rows: Array<{ name: string; after: number | null; due: boolean }> = await sql(
    dataSource,
    `SELECT p.name,
            CASE WHEN isfinite(p.retention_check_at)
                 THEN extract(epoch FROM p.retention_check_at - f.created_at)::float8 END AS after,
            COALESCE(p.retention_check_at <= clock_timestamp(), false) AS due
       FROM partitions p
       LEFT JOIN LATERAL (SELECT m.created_at FROM messages m WHERE m.tenant_id = p.tenant_id AND m.partition_id = p.id
                           ORDER BY m.seq LIMIT 1) f ON true
      WHERE p.tenant_id = $1 ORDER BY p.name`,
    [tenant],
  );
  return rows.map((row) => ({ name: row.name, checkAfterPush: row.after, due: row.due }));
}

/** Cursors that moved since the job last looked at their partition: what its moved-cursor index holds. */
async function moved(dataSource: Database, tenant: string): Promise<string[]> {
  const rows: Array<{ consumer_group: string }> = await sql(
    dataSource,
    `SELECT consumer_group FROM consumers WHERE tenant_id = $1 AND committed_offset > retention_seen
      ORDER BY consumer_group`,
    [tenant],
  );
  return rows.map((row) => row.consumer_group);
}

async function popAndAck(client: BrokerClient, queue: string, group: string, batch: number): Promise<string[]> {
  const body = (await client.pop(queue, { batch, consumerGroup: group, wait: false })).body as PopBody | undefined;
  if (!body?.messages?.length) return [];
  await client.ackAll(body).expect(200);
  return body.messages.map((message) => message.transactionId);
}

/** Pops and acks until `count` messages or nothing is left; a pop serves one partition. */
async function consume(client: BrokerClient, queue: string, group: string, count: number): Promise<string[]> {
  const acked: string[] = [];
  for (;;) {
    const got = await popAndAck(client, queue, group, count - acked.length);
    acked.push(...got);
    if (got.length === 0 || acked.length >= count) return acked;
  }
}

describe('retention: looked at when something became deletable', () => {
  const broker = useTestBroker();
  const job = () => broker.app.get(RetentionService);
  /** Rounds of this test's tenant (other files' tenants share the database) until the condition holds. */
  const roundsUntil = (condition: () => Promise<boolean>, what: string) =>
    waitFor(async () => {
      await job().runOnce([broker.client.tenant]);
      return condition();
    }, what);
  /**
   * As roundsUntil, bounded by the job's rounds instead of by time, for work of thousands of rows: each round is a
   * batch, and a loaded machine (the embedded database under two CPU hogs) only makes the rounds slower.
   */
  const batchesUntil = async (condition: () => Promise<boolean>, what: string, rounds = 200) => {
    for (let round = 0; round < rounds; round += 1) {
      // A round that outran its time budget is tried again, as the job's timer would; any other error fails.
      await job()
        .runOnce([broker.client.tenant])
        .catch((error: unknown) => {
          if (!(error instanceof DatabaseTimeoutError)) throw error;
        });
      if (await condition()) return;
    }
    throw new Error(`${what}: not within ${rounds} rounds of the job`);
  };
  /** Makes the tenant's partitions due now, then runs rounds until none of them is due any more. */
  const lookNow = async (tenant: string) => {
    await sql(broker.dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
      tenant,
    ]);
    await roundsUntil(
      async () => (await partitions(broker.dataSource, tenant)).every((partition) => !partition.due),
      'a look at every partition',
    );
  };

  it('does not make a new partition due: its first look is when time alone could delete its message', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'short', options: { retentionSeconds: 600 } }).expect(200);
    await client.configure({ queue: 'evicting', options: { retentionEnabled: false, maxWaitTimeSeconds: 300 } });
    await client.configure({ queue: 'forever', options: { retentionEnabled: false } }).expect(200);
    await client.push(
      ['short', 'evicting', 'forever', 'default'].flatMap((queue) =>
        ['a', 'b'].map((partition) => ({ queue, partition, payload: { queue } })),
      ),
    );
    const state = await sql<Array<{ queue: string; after: number | null; due: boolean }>>(
      dataSource,
      `SELECT q.name AS queue, extract(epoch FROM p.retention_check_at - m.created_at)::float8 AS after,
              COALESCE(p.retention_check_at <= clock_timestamp(), false) AS due
         FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
         JOIN messages m ON m.tenant_id = p.tenant_id AND m.partition_id = p.id
        WHERE p.tenant_id = $1 ORDER BY q.name, p.name`,
      [client.tenant],
    );
    expect(state.every((row) => !row.due)).toBe(true);
    const after = (queue: string) => state.filter((row) => row.queue === queue).map((row) => row.after);
    // The check is set from the push's transaction start, a moment before the message's own clock.
    for (const seconds of after('short')) expect(Math.abs(seconds! - 600)).toBeLessThan(5);
    for (const seconds of after('evicting')) expect(Math.abs(seconds! - 300)).toBeLessThan(5);
    for (const seconds of after('default')) expect(Math.abs(seconds! - 14 * 86_400)).toBeLessThan(5);
    expect(after('forever')).toEqual([null, null]);
  });

  it('leaves a retention change to the job: the request touches no partition, the job looks at each in batches', async () => {
    const { client, dataSource } = broker;
    const items = Array.from({ length: 6_000 }, (_, n) => ({ queue: 'reconfigured', partition: `r${n}`, payload: n }));
    await client.push(items).expect(201);
    await passTime(dataSource, client.tenant, 120);
    const checksBefore = await sql<Array<{ at: string }>>(
      dataSource,
      'SELECT retention_check_at::text AS at FROM partitions WHERE tenant_id = $1 ORDER BY id',
      [client.tenant],
    );

    await client.configure({ queue: 'reconfigured', options: { retentionSeconds: 60 } }).expect(200);
    // The configure changed no partition's row: only the queue's mark that a look is owed.
    expect(
      await sql(dataSource, 'SELECT retention_check_at::text AS at FROM partitions WHERE tenant_id = $1 ORDER BY id', [
        client.tenant,
      ]),
    ).toEqual(checksBefore);
    const [{ from }] = await sql<Array<{ from: string | null }>>(
      dataSource,
      `SELECT retention_recheck_from AS from FROM queues WHERE tenant_id = $1 AND name = 'reconfigured'`,
      [client.tenant],
    );
    expect(from).toBe('');

    // Pending messages two minutes old under a one-minute retention: the job deletes every one, over batches.
    await batchesUntil(async () => (await kept(dataSource, client.tenant)).length === 0, 'every message deleted');
    const [{ left }] = await sql<Array<{ left: string | null }>>(
      dataSource,
      `SELECT retention_recheck_from AS left FROM queues WHERE tenant_id = $1 AND name = 'reconfigured'`,
      [client.tenant],
    );
    expect(left).toBeNull();
  });

  it('hears of completed messages from the ack that moved the last group past them, not from a timer', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'done', options: { completedRetentionSeconds: 60 } }).expect(200);
    await client.pushMany('done', 3);
    const popped = await client.popLeased('done', { batch: 3, consumerGroup: 'g' });
    // Nobody has consumed anything: the look schedules pending retention only.
    await lookNow(client.tenant);
    expect((await partitions(dataSource, client.tenant))[0].checkAfterPush).toBeGreaterThan(13 * 86_400);
    expect(await moved(dataSource, client.tenant)).toEqual([]);

    await client.ackAll(popped).expect(200);
    expect(await moved(dataSource, client.tenant)).toEqual(['g']);
    await roundsUntil(async () => (await moved(dataSource, client.tenant)).length === 0, 'the moved cursor looked at');
    // Nothing is old enough yet; the next look is when the oldest comes of age under completed retention.
    expect(await kept(dataSource, client.tenant)).toHaveLength(3);
    const [partition] = await partitions(dataSource, client.tenant);
    expect(partition.checkAfterPush).toBeGreaterThanOrEqual(60);
    expect(partition.checkAfterPush).toBeLessThan(61);

    await passTime(dataSource, client.tenant, 61);
    await roundsUntil(
      async () => (await kept(dataSource, client.tenant)).length === 0,
      'the completed messages deleted',
    );
  });

  it('keeps what a group has not consumed, without polling for it, and deletes it once that group acks', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'two', options: { completedRetentionSeconds: 60 } }).expect(200);
    await client.pushMany('two', 4);
    expect(await consume(client, 'two', 'fast', 4)).toHaveLength(4);
    expect(await consume(client, 'two', 'slow', 1)).toEqual(['two-Default-0']);
    await passTime(dataSource, client.tenant, 61);
    await roundsUntil(async () => (await kept(dataSource, client.tenant)).length === 3, 'the message both consumed');

    // "slow" holds the rest back: no look is due until a cursor moves or pending retention comes.
    await lookNow(client.tenant);
    expect(await kept(dataSource, client.tenant)).toHaveLength(3);
    expect((await partitions(dataSource, client.tenant))[0].checkAfterPush).toBeGreaterThan(13 * 86_400);
    expect(await moved(dataSource, client.tenant)).toEqual([]);

    expect(await consume(client, 'two', 'slow', 4)).toHaveLength(3);
    await roundsUntil(async () => (await kept(dataSource, client.tenant)).length === 0, 'the rest deleted');
  });

  it('deletes what a deleted group held back: the group leaves its partitions to be looked at again', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'gone', options: { completedRetentionSeconds: 60 } }).expect(200);
    await client.pushMany('gone', 3, 'a');
    await client.pushMany('gone', 3, 'b');
    expect(await consume(client, 'gone', 'fast', 6)).toHaveLength(6);
    expect(await consume(client, 'gone', 'slow', 1)).toHaveLength(1);
    await passTime(dataSource, client.tenant, 61);
    await lookNow(client.tenant);
    expect(await kept(dataSource, client.tenant)).toHaveLength(5);

    await client.delete('/api/v1/consumer-groups/slow').expect(200);
    await roundsUntil(async () => (await kept(dataSource, client.tenant)).length === 0, 'the held messages deleted');
    const [{ rechecks }] = await sql<Array<{ rechecks: number }>>(
      dataSource,
      'SELECT count(*)::int AS rechecks FROM retention_rechecks WHERE tenant_id = $1',
      [client.tenant],
    );
    expect(rechecks).toBe(0);
  });

  it('shows how long due work has waited, as a metric and in the queue list', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'late', options: { retentionSeconds: 60 } }).expect(200);
    await client.pushMany('late', 2);
    await passTime(dataSource, client.tenant, 60 + 120);
    const listed = async () =>
      (
        (await client.get('/api/v1/resources/queues').expect(200)).body as {
          retentionLagSeconds: number;
        }
      ).retentionLagSeconds;
    expect(await listed()).toBeGreaterThanOrEqual(120);

    // A round that fails after finding the work leaves it due: the job's lag counts from when it became due.
    const claim = jest.spyOn(broker.app.get(RetentionRepository), 'claimDue').mockImplementationOnce(() => {
      throw new Error('down');
    });
    await expect(job().runOnce([client.tenant])).rejects.toThrow('down');
    claim.mockRestore();
    const scraped = async () => {
      const text = (await request(broker.app.getHttpServer()).get('/metrics').expect(200)).text;
      const line = /^leasehold_retention_lag_seconds (\S+)$/m.exec(text);
      expect(line).not.toBeNull();
      return Number(line![1]);
    };
    expect(await scraped()).toBeGreaterThanOrEqual(120);

    await roundsUntil(async () => (await kept(dataSource, client.tenant)).length === 0, 'the expired messages deleted');
    expect(await listed()).toBe(0);
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('retention racing pushes and acks', () => {
  const broker = useTestBroker({ DB_POOL_SIZE: '8' });

  it('wakes the polls that parked while it held their cursor, instead of leaving them to their timeout', async () => {
    const { client, dataSource } = broker;
    const job = broker.app.get(RetentionService);
    const polls = broker.app.get(ParkedPolls);
    const [, waiting] = await client.pushMany('held', 2);
    await client.ackAll(await client.popLeased('held', { batch: 1, consumerGroup: 'g' })).expect(200);
    // Polls parked on other brokers hear of it as of any redelivery.
    const listener = new Client({ connectionString: process.env.DATABASE_URL });
    const heard: string[][] = [];
    listener.on('notification', (notice) => heard.push((notice.payload ?? '').split('\n')));
    await listener.connect();
    const holder = new HeldConnection(dataSource);
    try {
      await listener.query(`LISTEN ${REDELIVERY_CHANNEL}`);
      // The cursor moved, so a round will look at its partition. Meanwhile it is held, as a round's cut and its
      // marking hold it: the claim skips it and the poll parks, with a message there and no push to come.
      await holder.connect();
      await holder.startTransaction();
      await holder.query(`SELECT 1 FROM consumers WHERE tenant_id = $1 FOR NO KEY UPDATE`, [client.tenant]);
      const poll = client
        .pop('held', { batch: 1, consumerGroup: 'g', wait: true, timeout: 600_000 })
        .then((answer) => answer);
      await waitFor(() => polls.parkedCount(client.tenant, 'held', 'g') === 1, 'the poll parked');
      await holder.commitTransaction();

      await waitFor(async () => {
        await job.runOnce([client.tenant]);
        return polls.parkedCount(client.tenant, 'held', 'g') === 0;
      }, 'the parked poll woken by a round');
      const answer = await poll;
      expect(answer.status).toBe(200);
      expect((answer.body as PopBody).messages.map((message) => message.transactionId)).toEqual([waiting]);
      await waitFor(
        () => heard.some(([, tenant, queue, group]) => tenant === client.tenant && queue === 'held' && group === 'g'),
        "the group's redelivery notified",
      );
    } finally {
      await holder.release();
      await listener.end();
    }
  });

  it('loses no message a group has not consumed, and misses no cursor that moved while it looked', async () => {
    const { client, dataSource } = broker;
    const job = broker.app.get(RetentionService);
    await client.configure({ queue: 'race', options: { completedRetentionSeconds: 60 } }).expect(200);
    const partitionsOf = ['a', 'b', 'c', 'd'];
    const pushed: string[] = [];
    const received: Record<string, string[]> = { one: [], two: [] };
    let pushing = true;
    const producer = (async () => {
      for (let round = 0; round < 25; round++) {
        const items = partitionsOf.map((partition) => ({
          queue: 'race',
          partition,
          payload: { round },
          transactionId: `race-${partition}-${round}`,
        }));
        await client.push(items).expect(201);
        pushed.push(...items.map((item) => item.transactionId));
      }
      pushing = false;
    })();
    const consumer = (group: string) =>
      (async () => {
        while (pushing || received[group].length < pushed.length) {
          received[group].push(...(await popAndAck(client, 'race', group, 3)));
        }
      })();
    let looking = true;
    const rounds = (async () => {
      while (looking) {
        // Locked in primary-key order first, as pushes lock them: in the table's order, it deadlocked with a push.
        await sql(
          dataSource,
          `UPDATE partitions p SET retention_check_at = clock_timestamp()
             FROM (SELECT id FROM partitions WHERE tenant_id = $1 ORDER BY id FOR NO KEY UPDATE) l
            WHERE p.tenant_id = $1 AND p.id = l.id`,
          [client.tenant],
        );
        await job.runOnce([client.tenant]);
      }
    })();
    await Promise.all([producer, consumer('one'), consumer('two')]);
    looking = false;
    await rounds;

    for (const group of ['one', 'two']) expect([...received[group]].sort()).toEqual([...pushed].sort());
    // Every message was consumed by both groups while the job looked: none is deleted before it is old enough, and
    // once it is, rounds delete them all without a forced look: no moved cursor went unheard.
    expect((await kept(dataSource, client.tenant)).length).toBe(pushed.length);
    await passTime(dataSource, client.tenant, 61);
    await waitFor(async () => {
      await job.runOnce([client.tenant]);
      return (await kept(dataSource, client.tenant)).length === 0;
    }, 'every consumed message deleted');
  });
});
