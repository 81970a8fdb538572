import { Client } from 'pg';
import { Database } from '../src/database/database';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, cursors, expireLeases, sql } from './support/db-state';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { expectPayloadsAsSent, sentItems } from './support/sent-payloads';
import { useTestBroker } from './support/test-broker';
import { waitFor, waitForLockWaiter, within } from './support/wait';

/** The tenant's messages of a queue, by transaction id, in offset order. */
async function kept(dataSource: Database, tenant: string, queue: string): Promise<string[]> {
  const rows: Array<{ transaction_id: string }> = await sql(
    dataSource,
    `SELECT m.transaction_id FROM messages m
       JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
       JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE m.tenant_id = $1 AND q.name = $2 ORDER BY p.name, m.seq`,
    [tenant, queue],
  );
  return rows.map((row) => row.transaction_id);
}

const ids = (body: PopBody) => body.messages.map((message) => message.transactionId);

/** The tenant's partitions are the retention job's next work, before any other's. */
async function firstInLine(dataSource: Database, tenant: string): Promise<void> {
  await sql(dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [tenant]);
}

describe('retention', () => {
  const broker = useTestBroker();
  const job = () => broker.app.get(RetentionService);
  /**
   * A round that looked at this test's partitions, put first in line (other files' queues share the database). On a
   * loaded machine a round can spend its budget before it reaches them: it is run again until one did.
   */
  const round = async () => {
    await firstInLine(broker.dataSource, broker.client.tenant);
    await waitFor(
      async () => (await job().runOnce([broker.client.tenant])).partitions > 0,
      'a round that looked at the partitions',
    );
  };

  describe('completedRetentionSeconds', () => {
    it('deletes what every group has moved past once it is old enough, and keeps the rest', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'done', options: { completedRetentionSeconds: 60 } }).expect(200);
      await client.pushMany('done', 5);
      const first = await client.popLeased('done', { batch: 3, consumerGroup: 'fast' });
      await client.ackAll(first).expect(200);
      const slow = await client.popLeased('done', { batch: 1, consumerGroup: 'slow' });
      await client.ackAll(slow).expect(200);

      await round();
      expect(await kept(dataSource, client.tenant, 'done')).toHaveLength(5);

      await ageMessages(dataSource, client.tenant, 61);
      await round();

      // "slow" has moved past one message only: that one goes.
      expect(await kept(dataSource, client.tenant, 'done')).toEqual([
        'done-Default-1',
        'done-Default-2',
        'done-Default-3',
        'done-Default-4',
      ]);
      expect(ids(await client.popLeased('done', { consumerGroup: 'fast' }))).toEqual([
        'done-Default-3',
        'done-Default-4',
      ]);
      expect(ids(await client.popLeased('done', { consumerGroup: 'slow' }))).toEqual([
        'done-Default-1',
        'done-Default-2',
        'done-Default-3',
        'done-Default-4',
      ]);
    });

    it('keeps every message of a partition that no group has read, and a group that comes later starts at the first one kept', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'late', options: { completedRetentionSeconds: 60 } }).expect(200);
      await client.pushMany('late', 4);
      await ageMessages(dataSource, client.tenant, 61);
      await round();
      expect(await kept(dataSource, client.tenant, 'late')).toHaveLength(4);

      const early = await client.popLeased('late', { batch: 2, consumerGroup: 'early' });
      await client.ackAll(early).expect(200);
      await round();
      expect(await kept(dataSource, client.tenant, 'late')).toEqual(['late-Default-2', 'late-Default-3']);

      const newcomer = await client.popLeased('late', { consumerGroup: 'newcomer', subscriptionMode: 'all' });
      expect(ids(newcomer)).toEqual(['late-Default-2', 'late-Default-3']);
    });

    it("keeps consumed messages forever with 0, and applies the broker's default when unset", async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'forever', options: { completedRetentionSeconds: 0 } }).expect(200);
      await client.configure({ queue: 'default' }).expect(200);
      for (const queue of ['forever', 'default']) {
        await client.pushMany(queue, 2);
        await client.ackAll(await client.popLeased(queue)).expect(200);
      }
      await ageMessages(dataSource, client.tenant, 3_601);
      await round();

      expect(await kept(dataSource, client.tenant, 'forever')).toHaveLength(2);
      expect(await kept(dataSource, client.tenant, 'default')).toEqual([]);
    });
  });

  describe('retentionSeconds', () => {
    it('deletes messages nobody consumed once they are older, and the cursors move past them', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'stale', options: { retentionEnabled: true, retentionSeconds: 30 } }).expect(200);
      await client.pushMany('stale', 3);
      await client.pop('stale', { consumerGroup: 'g', batch: 1, autoAck: true }).expect(200);
      await ageMessages(dataSource, client.tenant, 31);
      await client.push([{ queue: 'stale', payload: 'fresh', transactionId: 'fresh' }]).expect(201);

      await round();

      expect(await kept(dataSource, client.tenant, 'stale')).toEqual(['fresh']);
      expect((await cursors(dataSource, client.tenant, 'stale'))[0].committedOffset).toBe(3);
      expect(ids(await client.popLeased('stale', { consumerGroup: 'g' }))).toEqual(['fresh']);
      expect(ids(await client.popLeased('stale'))).toEqual(['fresh']);
    });

    it('reaches in one round every tenant with work due, past the hundred tenants a claim looks at', async () => {
      const { app, dataSource } = broker;
      const tenants = Array.from({ length: 150 }, () => new BrokerClient(app, newTenant()));
      const ids = tenants.map((tenant) => tenant.tenant);
      for (const tenant of tenants) {
        await tenant.configure({ queue: 'aged', options: { retentionSeconds: 30 } }).expect(200);
      }
      const stored = async (): Promise<Map<string, number>> => {
        const rows = await sql<Array<{ tenant: string; messages: number }>>(
          dataSource,
          'SELECT tenant_id AS tenant, count(*)::int AS messages FROM messages WHERE tenant_id = ANY($1::uuid[]) GROUP BY 1',
          [ids],
        );
        return new Map(rows.map((row) => [row.tenant, row.messages]));
      };
      // Every tenant with one message past its retention, all due now.
      const allDue = async (): Promise<void> => {
        const left = await stored();
        for (const tenant of tenants) if (!left.has(tenant.tenant)) await tenant.pushMany('aged', 1);
        await sql(
          dataSource,
          `UPDATE messages SET created_at = now() - interval '31 seconds' WHERE tenant_id = ANY($1::uuid[])`,
          [ids],
        );
        await sql(
          dataSource,
          `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = ANY($1::uuid[])`,
          [ids],
        );
      };

      // A round its budget cut short (a loaded machine) shows nothing of the claim: all is made due again, and run again.
      await waitFor(
        async () => {
          await allDue();
          return (await job().runOnce(ids)).finished;
        },
        'a round that ran to its end',
        60_000,
      );

      expect(await stored()).toEqual(new Map());
    });

    it('never deletes a message under a live lease: it goes once the lease has ended', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'held', options: { retentionSeconds: 30 } }).expect(200);
      await client.pushMany('held', 3);
      const leased = await client.popLeased('held', { batch: 2 });
      await ageMessages(dataSource, client.tenant, 31);

      await round();
      expect(await kept(dataSource, client.tenant, 'held')).toHaveLength(3);
      expect((await client.extend(leased.leaseId!, 30)).body.renewed).toBe(1);

      await expireLeases(dataSource, client.tenant, leased.leaseId!);
      await round();
      expect(await kept(dataSource, client.tenant, 'held')).toEqual([]);
      await client.pop('held').expect(204);
    });

    it('keeps unconsumed messages with retentionEnabled false', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'kept', options: { retentionEnabled: false, retentionSeconds: 30 } }).expect(200);
      await client.pushMany('kept', 2);
      await ageMessages(dataSource, client.tenant, 31);
      await round();
      expect(await kept(dataSource, client.tenant, 'kept')).toHaveLength(2);
    });
  });

  describe('maxWaitTimeSeconds', () => {
    it('dead-letters a message for every group that had not consumed it, then removes it', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'waits', options: { maxWaitTimeSeconds: 30 } }).expect(200);
      await client.pushMany('waits', 3);
      await client.pop('waits', { consumerGroup: 'a', batch: 1, autoAck: true }).expect(200);
      await client.pop('waits', { consumerGroup: 'b', batch: 1 }).expect(200);
      await sql(dataSource, 'UPDATE consumers SET lease_expires_at = now() WHERE tenant_id = $1', [client.tenant]);
      await ageMessages(dataSource, client.tenant, 31);

      await round();

      expect(await kept(dataSource, client.tenant, 'waits')).toEqual([]);
      const letters = await client.get('/api/v1/dlq', { queue: 'waits', consumerGroup: 'a' }).expect(200);
      expect(letters.body.messages.map((letter: { transactionId: string }) => letter.transactionId).sort()).toEqual([
        'waits-Default-1',
        'waits-Default-2',
      ]);
      expect(letters.body.messages[0].errorMessage).toBe(
        'evicted: waited longer than the queue allows (maxWaitTimeSeconds or ttl)',
      );
      const b = await client.get('/api/v1/dlq', { queue: 'waits', consumerGroup: 'b' }).expect(200);
      expect(b.body.total).toBe(3);
      await client.pop('waits', { consumerGroup: 'a' }).expect(204);
      await client.pop('waits', { consumerGroup: 'b' }).expect(204);
    });

    it('keeps each payload as it was pushed, minified, in the dead letters it makes', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'texts', options: { maxWaitTimeSeconds: 30 } }).expect(200);
      await client.pop('texts', { consumerGroup: 'a' }).expect(204);
      await client.postText('/api/v1/push', `{"items": ${sentItems('texts', 'p')}}`).expect(201);
      await ageMessages(dataSource, client.tenant, 31);

      await round();

      expect(await kept(dataSource, client.tenant, 'texts')).toEqual([]);
      const letters = await client.get('/api/v1/dlq', { queue: 'texts', consumerGroup: 'a', limit: 100 }).expect(200);
      expectPayloadsAsSent(letters.text, 'p');
    });

    it('only removes the message when the queue keeps no dead letters', async () => {
      const { client, dataSource } = broker;
      await client
        .configure({ queue: 'dropped', options: { maxWaitTimeSeconds: 30, deadLetterQueue: false } })
        .expect(200);
      await client.pushMany('dropped', 2);
      await client.pop('dropped', { consumerGroup: 'a', batch: 1, autoAck: true }).expect(200);
      await ageMessages(dataSource, client.tenant, 31);
      await round();

      expect(await kept(dataSource, client.tenant, 'dropped')).toEqual([]);
      expect((await client.get('/api/v1/dlq', { queue: 'dropped' }).expect(200)).body.total).toBe(0);
    });
  });

  describe('maxSize', () => {
    it('stores what fits and answers the rest failed with "queue is full", until consumers make room', async () => {
      const { client } = broker;
      await client.configure({ queue: 'capped', options: { maxSize: 3 } }).expect(200);

      const first = await client
        .pushMany('capped', 0)
        .then(() =>
          client.push(Array.from({ length: 5 }, (_, n) => ({ queue: 'capped', payload: n, transactionId: `c${n}` }))),
        );
      expect(first.status).toBe(201);
      expect(first.body.map((item: { status: string }) => item.status)).toEqual([
        'queued',
        'queued',
        'queued',
        'failed',
        'failed',
      ]);
      expect(first.body[3]).toMatchObject({ message_id: null, transaction_id: 'c3', error: 'queue is full' });

      const again = await client.push([
        { queue: 'capped', payload: 0, transactionId: 'c0' },
        { queue: 'capped', payload: 9, transactionId: 'c9' },
      ]);
      expect(again.body.map((item: { status: string }) => item.status)).toEqual(['duplicate', 'failed']);

      await client.ackAll(await client.popLeased('capped', { batch: 2 })).expect(200);
      const later = await client.push([
        { queue: 'capped', payload: 3, transactionId: 'c3' },
        { queue: 'capped', payload: 4, transactionId: 'c4' },
        { queue: 'capped', payload: 5, transactionId: 'c5' },
      ]);
      expect(later.body.map((item: { status: string }) => item.status)).toEqual(['queued', 'queued', 'failed']);
    });
  });

  describe('dead letters, empty partitions and what resources show', () => {
    it('deletes dead letters past dlqRetentionSeconds', async () => {
      const { client, dataSource } = broker;
      await client
        .configure({
          queue: 'letters',
          options: { retryLimit: 0, dlqRetentionSeconds: 30, completedRetentionSeconds: 0 },
        })
        .expect(200);
      await client.pushMany('letters', 1);
      await client.ackAll(await client.popLeased('letters'), 'failed').expect(200);
      expect((await client.get('/api/v1/dlq', { queue: 'letters' })).body.total).toBe(1);

      await ageMessages(dataSource, client.tenant, 31);
      await round();
      expect((await client.get('/api/v1/dlq', { queue: 'letters' })).body.total).toBe(0);
    });

    it("shows each queue's retention in force and its pending and retained counts", async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'shown', options: { completedRetentionSeconds: 60, maxSize: 100 } }).expect(200);
      await client.pushMany('shown', 4);
      await client.ackAll(await client.popLeased('shown', { batch: 3 })).expect(200);
      await ageMessages(dataSource, client.tenant, 61);
      await round();

      const queue = (await client.get('/api/v1/resources/queues/shown').expect(200)).body;
      expect(queue).toMatchObject({ messages: 4, pending: 1, retained: 1 });
      expect(queue.retention).toEqual({
        completedRetentionSeconds: 60,
        retentionEnabled: true,
        retentionSeconds: 1_209_600,
        maxWaitTimeSeconds: 0,
        maxSize: 100,
        dlqRetentionSeconds: 1_209_600,
        ttl: 0,
      });
      expect(queue.options).toMatchObject({ completedRetentionSeconds: 60, maxSize: 100 });
      expect(queue.options).not.toHaveProperty('retentionSeconds');
    });
  });

  describe('a cursor below messages that are gone (a group created while retention cut)', () => {
    const deleteFirst = (count: number) =>
      sql(
        broker.dataSource,
        `DELETE FROM messages m USING partitions p
          WHERE m.tenant_id = $1 AND p.tenant_id = m.tenant_id AND p.id = m.partition_id AND p.name = 'gap' AND m.seq <= $2`,
        [broker.client.tenant, count],
      );

    it('gets the messages kept past the gap', async () => {
      const { client } = broker;
      await client.pushMany('holes', 4, 'gap');
      await deleteFirst(2);

      expect(ids(await client.popLeased('holes', { consumerGroup: 'g' }))).toEqual(['holes-gap-2', 'holes-gap-3']);
    });

    it('does not hold up its group: the pop that finds nothing past it moves it on, and the next serves the other partitions', async () => {
      const { client } = broker;
      await client.pushMany('holes', 2, 'gap');
      await client.pop('holes', { consumerGroup: 'g', batch: 1, autoAck: true }, 'gap').expect(200);
      await deleteFirst(2);
      await client.pushMany('holes', 1, 'full');

      const answers: number[] = [];
      for (let pop = 0; pop < 3 && !answers.includes(200); pop += 1) {
        answers.push((await client.pop('holes', { consumerGroup: 'g', partitions: 1 })).status);
      }
      expect(answers).toContain(200);
      expect(
        (await cursors(broker.dataSource, client.tenant, 'holes')).find((row) => row.partition === 'gap'),
      ).toMatchObject({ committedOffset: 2 });
    });
  });

  it("never touches another tenant's rows, whatever this tenant's settings", async () => {
    const { client, dataSource } = broker;
    const other = new BrokerClient(broker.app, newTenant());
    await client.configure({ queue: 'shared', options: { retentionSeconds: 30 } }).expect(200);
    await other.configure({ queue: 'shared' }).expect(200);
    await client.pushMany('shared', 2);
    await other.pushMany('shared', 2);
    await ageMessages(dataSource, client.tenant, 31);
    await ageMessages(dataSource, other.tenant, 31);

    await round();

    expect(await kept(dataSource, client.tenant, 'shared')).toEqual([]);
    expect(await kept(dataSource, other.tenant, 'shared')).toHaveLength(2);
  });
});

describe('retention: empty partitions', () => {
  const broker = useTestBroker({ EMPTY_PARTITION_GRACE_SECONDS: '0' });

  it('removes a partition left with nothing, and the next push creates it again without a consumer noticing', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'emptied', options: { completedRetentionSeconds: 1 } }).expect(200);
    await client.pushMany('emptied', 2, 'p1');
    await client.ackAll(await client.popLeased('emptied', {}, 'p1')).expect(200);
    await ageMessages(dataSource, client.tenant, 2);
    await firstInLine(dataSource, client.tenant);
    let removed = 0;
    await waitFor(async () => {
      const outcome = await broker.app.get(RetentionService).runOnce([client.tenant]);
      removed += outcome.deleted.partition;
      return outcome.partitions > 0;
    }, 'a round that looked at the partitions');

    expect(removed).toBeGreaterThanOrEqual(1);
    const [{ n }] = await sql(dataSource, 'SELECT count(*)::int AS n FROM partitions WHERE tenant_id = $1', [
      client.tenant,
    ]);
    expect(n).toBe(0);
    await client.push([{ queue: 'emptied', partition: 'p1', payload: 'again', transactionId: 'again' }]).expect(201);
    expect(ids(await client.popLeased('emptied', {}, 'p1'))).toEqual(['again']);
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('retention on two brokers at once', () => {
  it('works each queue on one of them: every evicted message dead-lettered exactly once, no errors', async () => {
    const first = await createTestApp();
    const second = await createTestApp();
    try {
      const client = new BrokerClient(first, newTenant());
      const dataSource = first.get(Database);
      for (let index = 0; index < 20; index += 1) {
        await client.configure({ queue: `q${index}`, options: { maxWaitTimeSeconds: 30 } }).expect(200);
        await client.pop(`q${index}`, { consumerGroup: 'g' }).expect(204);
        await client.pushMany(`q${index}`, 5);
      }
      await ageMessages(dataSource, client.tenant, 31);
      await firstInLine(dataSource, client.tenant);
      const count = async (table: string): Promise<number> =>
        (await sql(dataSource, `SELECT count(*)::int AS n FROM ${table} WHERE tenant_id = $1`, [client.tenant]))[0].n;

      let evicted = 0;
      for (let attempt = 0; attempt < 20 && (await count('messages')) > 0; attempt += 1) {
        const rounds = await Promise.all([
          first.get(RetentionService).runOnce([client.tenant]),
          second.get(RetentionService).runOnce([client.tenant]),
        ]);
        evicted += rounds[0].deleted.evicted + rounds[1].deleted.evicted;
        await firstInLine(dataSource, client.tenant);
      }

      expect(await count('messages')).toBe(0);
      expect(evicted).toBe(100);
      expect(await count('dead_letters')).toBe(100);
    } finally {
      await first.close();
      await second.close();
    }
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('retention and pushes holding the same partitions', () => {
  const broker = useTestBroker();
  let observer: Client;

  beforeAll(async () => {
    observer = new Client({ connectionString: process.env.DATABASE_URL });
    await observer.connect();
  });

  afterAll(() => observer.end());

  it('takes the partitions it schedules in id order, as a push does, so that neither waits on the other in a cycle', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'busy', options: { completedRetentionSeconds: 1 } }).expect(200);
    const names = Array.from({ length: 20 }, (_, index) => `p${index}`);
    await client
      .push(names.map((partition) => ({ queue: 'busy', partition, payload: partition, transactionId: partition })))
      .expect(201);
    const partitions: Array<{ id: string; name: string }> = await sql(
      dataSource,
      'SELECT id, name FROM partitions WHERE tenant_id = $1 ORDER BY id',
      [client.tenant],
    );
    const [lowest, ...others] = partitions;
    await firstInLine(dataSource, client.tenant);

    // A push holds the lowest partition: the schedule must wait for it before taking any other.
    await observer.query('BEGIN');
    await observer.query('SELECT 1 FROM partitions WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE', [
      client.tenant,
      lowest.id,
    ]);
    const round = broker.app.get(RetentionService).runOnce([client.tenant]);
    try {
      await waitForLockWaiter(observer, 'hurried AS');
      const pushed = await within(
        client
          .push(others.map(({ name }) => ({ queue: 'busy', partition: name, payload: 'more' })))
          .then((response) => response),
        'a push to every other partition while the schedule waits',
        10_000,
      );
      expect(pushed.status).toBe(201);
    } finally {
      await observer.query('COMMIT');
    }
    await round;
  });
});
