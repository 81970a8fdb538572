import { randomUUID } from 'node:crypto';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client, Pool } from 'pg';
import request from 'supertest';
import { Database, Session } from '../src/database/database';
import { uuidv7 } from '../src/common/uuid';
import { OpenTransaction, TransactionRunner } from '../src/database/transaction-runner';
import { MaintenanceService } from '../src/maintenance/maintenance.service';
import { nothing, prepared, rows as rowsOf, sql, statement } from '../src/database/statement';
import { UnitOfWork } from '../src/database/unit-of-work';
import { Writes } from '../src/wakeup/writes';
import { REDELIVERY_CHANNEL, WakeupChannel } from '../src/wakeup/wakeup-channel';
import { HandedOutLeases } from '../src/ack/handed-out-leases';
import { MetricsService } from '../src/metrics/metrics.service';
import { BrokerClient } from './support/broker-client';
import { cursors, storedCounts } from './support/db-state';
import { backendPidOf, countMessages, openSession } from './support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';

/** What `fn` did on the pool's one connection, in round trips. */
async function roundTripsOn(pool: Pool, fn: () => Promise<unknown>): Promise<number> {
  const client = await pool.connect();
  const trips = countMessages(client, 'readyForQuery');
  client.release();
  try {
    await fn().catch(() => undefined);
    return trips.count;
  } finally {
    trips.stop();
  }
}

const xidOf = async (manager: Session): Promise<string> =>
  (await manager.query('SELECT txid_current()::text AS xid WHERE $1::int = 1', [1]))[0].xid as string;

// Round trips on the wire: the embedded database takes BEGIN on its own.
(onEmbeddedDatabase ? describe.skip : describe)('a unit of work costs its statements’ round trips and no more', () => {
  let app: NestExpressApplication;
  let pool: Pool;
  let observer: Client;
  let runner: TransactionRunner;

  beforeAll(async () => {
    // One connection, so that every statement of every unit is on the connection counted.
    app = await createTestApp({ DB_POOL_SIZE: '1', JWT_ENABLED: 'false' });
    pool = app.get(Database).pool;
    runner = app.get(TransactionRunner);
    // Its refresh would share the counted connection.
    await app.get(MaintenanceService).onApplicationShutdown();
    observer = await openSession();
  });

  afterAll(async () => {
    await observer.end();
    await app.close();
  });

  const roundTripsOf = (fn: () => Promise<unknown>): Promise<number> => roundTripsOn(pool, fn);

  async function backendPid(): Promise<number> {
    const client = await pool.connect();
    try {
      return await backendPidOf(client);
    } finally {
      client.release();
    }
  }

  const statusOf = async (xid: string): Promise<string> =>
    (await observer.query('SELECT txid_status($1::bigint) AS status', [xid])).rows[0].status as string;

  it('sends BEGIN with the first statement and the last statement with COMMIT, one transaction throughout', async () => {
    const writes = app.get(Writes);
    let xid = '';
    let second = '';
    const trips = await roundTripsOf(() =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        second = await xidOf(unit.session);
        unit.lastly(statement(sql`SELECT pg_advisory_xact_lock(${7_130_001})`, nothing));
      }),
    );

    expect(trips).toBe(3);
    expect(second).toBe(xid);
    expect(await statusOf(xid)).toBe('committed');
  });

  it.each([
    ['its last statement', async (unit: UnitOfWork) => unit.lastly(statement(sql`SELECT 1 / ${0}::int`, nothing))],
    [
      'the statement it commits with',
      async (unit: UnitOfWork) =>
        void (await unit.commitWith(prepared('round_trips_commit_divide', sql`SELECT 1 / ${0}::int`, nothing))),
    ],
  ])(
    'rolls the whole unit back when %s fails, skips the COMMIT sent with it and keeps the connection',
    async (_how, fail) => {
      const writes = app.get(Writes);
      const pidBefore = await backendPid();
      let xid = '';
      await expect(
        writes.run('round-trips', async (unit: UnitOfWork) => {
          xid = await xidOf(unit.session);
          await fail(unit);
        }),
      ).rejects.toThrow('division by zero');

      expect(await statusOf(xid)).toBe('aborted');
      expect(await backendPid()).toBe(pidBefore);
    },
  );

  it('rolls back on its connection a unit whose only statement, its last, failed with BEGIN and COMMIT around it', async () => {
    const writes = app.get(Writes);
    const pidBefore = await backendPid();
    let trips = 0;
    await expect(
      (async () => {
        trips = await roundTripsOf(() =>
          writes.run('round-trips', async (unit: UnitOfWork) => {
            unit.lastly(prepared('round_trips_divide', sql`SELECT 1 / ${1}::int`, nothing));
          }),
        );
        await writes.run('round-trips', async (unit: UnitOfWork) => {
          unit.lastly(prepared('round_trips_divide', sql`SELECT 1 / ${0}::int`, nothing));
        });
      })(),
    ).rejects.toThrow('division by zero');

    // Its first run on the connection too: BEGIN, the statement parsed by its name and COMMIT, one round trip.
    expect(trips).toBe(1);
    // A connection released inside a failed transaction would have been closed (see connection-hygiene).
    expect(await backendPid()).toBe(pidBefore);
  });

  it('commits with a statement whose rows it reads, in one round trip with the NOTIFYs; what follows runs outside', async () => {
    const writes = app.get(Writes);
    await observer.query(`LISTEN ${REDELIVERY_CHANNEL}`);
    const heard = new Promise<string>((resolve) =>
      observer.on('notification', (message) => resolve(message.payload ?? '')),
    );
    let xid = '';
    let rows: Array<{ xid: string }> = [];
    let after: Array<{ xid: string }> = [];
    const trips = await roundTripsOf(() =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        unit.redeliver({ queue: 'round-trips', consumerGroup: '__QUEUE_MODE__', partitions: new Map([['a', 1]]) });
        rows = await unit.commitWith(
          prepared(
            'round_trips_commit_with',
            sql`SELECT txid_current()::text AS xid WHERE ${true}`,
            rowsOf<{ xid: string }>,
          ),
        );
        after = await unit.session.query('SELECT txid_current()::text AS xid');
      }),
    );

    expect(trips).toBe(3);
    expect(rows).toEqual([{ xid }]);
    expect(await statusOf(xid)).toBe('committed');
    expect(after[0].xid).not.toBe(xid);
    expect(await heard).toContain('round-trips');
    await observer.query(`UNLISTEN ${REDELIVERY_CHANNEL}`);
  });

  it('refuses a second commit, and a last statement beside a statement to commit with, rolling back', async () => {
    const writes = app.get(Writes);
    const commitWith = prepared('round_trips_commit_once', sql`SELECT ${1}::int AS n`, nothing);
    await expect(
      writes.run('round-trips', async (unit: UnitOfWork) => {
        await unit.commitWith(commitWith);
        await unit.commitWith(commitWith);
      }),
    ).rejects.toThrow('a unit of work commits once');
    let xid = '';
    await expect(
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        unit.lastly(statement(sql`SELECT 1`, nothing));
        await unit.commitWith(commitWith);
      }),
    ).rejects.toThrow('has no last statement');
    expect(await statusOf(xid)).toBe('aborted');
  });

  it('sends the write deferred to the COMMIT and the checks after the last statement in its one round trip', async () => {
    const writes = app.get(Writes);
    let xid = '';
    const trips = await roundTripsOf(() =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        unit.withNext(statement(sql`SELECT pg_advisory_xact_lock(${7_130_011})`, nothing));
        unit.lastly(statement(sql`UPDATE queues SET name = name WHERE tenant_id = ${uuidv7()}`, nothing));
        unit.checkAtCommit(statement(sql`SELECT 1 WHERE ${1}::int = 2`, nothing));
      }),
    );

    expect(await statusOf(xid)).toBe('committed');
    expect(trips).toBe(2);
  });

  it("prepares a named statement sent behind the first of the COMMIT's round trip once, by its name", async () => {
    const writes = app.get(Writes);
    const name = 'round_trips_behind_the_first';
    const unitOf = (lock: number) =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        unit.withNext(statement(sql`SELECT pg_advisory_xact_lock(${lock})`, nothing));
        unit.lastly(prepared(name, sql`UPDATE queues SET name = name WHERE tenant_id = ${uuidv7()}`, nothing));
      });
    await unitOf(7_130_041);
    const client = await pool.connect();
    try {
      const { rows } = await client.query('SELECT name FROM pg_prepared_statements WHERE name = $1', [name]);
      expect(rows).toEqual([{ name }]);
    } finally {
      client.release();
    }
    // Parsed again, it would be refused as a statement that already exists.
    const trips = await roundTripsOf(() => unitOf(7_130_042));
    expect(trips).toBe(1);
  });

  it('parses it again next time when a failure ahead of it skipped its parse', async () => {
    const writes = app.get(Writes);
    const name = 'round_trips_skipped_behind_a_failure';
    const unitOf = (fail: boolean) =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        unit.withNext(statement(sql`SELECT 1 / ${fail ? 0 : 1}::int`, nothing));
        unit.lastly(prepared(name, sql`UPDATE queues SET name = name WHERE tenant_id = ${uuidv7()}`, nothing));
      });
    await expect(unitOf(true)).rejects.toThrow('division by zero');

    // Taken for prepared, it would be bound by a name the server does not know.
    await expect(unitOf(false)).resolves.toBeUndefined();
  });

  it('sends a deferred write ahead of the next statement, which sees what it did', async () => {
    const writes = app.get(Writes);
    const held = await writes.run('round-trips', async (unit: UnitOfWork) => {
      unit.withNext(statement(sql`SELECT pg_advisory_xact_lock(${7_130_031})`, nothing));
      return unit.run(
        statement(
          sql`SELECT count(*)::int AS n FROM pg_locks
               WHERE locktype = 'advisory' AND objid = ${7_130_031} AND pid = pg_backend_pid()`,
          (rows: Array<{ n: number }>) => rows[0].n,
        ),
      );
    });

    expect(held).toBe(1);
  });

  it("answers a deferred read when the next statement's round trip does, both in one round trip", async () => {
    const writes = app.get(Writes);
    const read = (n: number) =>
      prepared(`round_trips_read_${n}`, sql`SELECT ${n}::int AS n`, (rows: Array<{ n: number }>) => rows[0].n);
    const both = () =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        const first = unit.withNextRead(read(41));
        const second = await unit.run(read(42));
        return [await first, second];
      });
    // The first prepares the statements on the connection; prepared ones share a round trip.
    await both();
    let answers: number[] = [];
    const trips = await roundTripsOf(async () => {
      answers = await both();
    });

    expect(answers).toEqual([41, 42]);
    expect(trips).toBe(2);
  });

  it("sends a read behind the next statement's, in its round trip, where it sees what that statement did", async () => {
    const writes = app.get(Writes);
    const lock = prepared(
      'round_trips_lock',
      sql`SELECT pg_advisory_xact_lock(${7_130_032})::text AS locked`,
      (rows: unknown[]) => rows.length,
    );
    const held = prepared(
      'round_trips_held',
      sql`SELECT count(*)::int AS n FROM pg_locks
           WHERE locktype = 'advisory' AND objid = ${7_130_032} AND pid = pg_backend_pid()`,
      (rows: Array<{ n: number }>) => rows[0].n,
    );
    const both = () =>
      writes.run('round-trips', async (unit: UnitOfWork) => {
        const after = unit.readAfterNext(held);
        const locked = await unit.run(lock);
        return [locked, await after];
      });
    // The first prepares the statements on the connection; prepared ones share a round trip.
    await both();
    let answers: number[] = [];
    const trips = await roundTripsOf(async () => {
      answers = await both();
    });

    expect(answers).toEqual([1, 1]);
    expect(trips).toBe(2);
  });

  it('rolls back a unit whose read after the next statement would reach the COMMIT', async () => {
    const writes = app.get(Writes);
    let xid = '';
    await expect(
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        void unit.readAfterNext(statement(sql`SELECT ${1}::int AS n`, (rows: Array<{ n: number }>) => rows[0].n));
      }),
    ).rejects.toThrow('a deferred read reached the COMMIT');

    expect(await statusOf(xid)).toBe('aborted');
  });

  it('rolls back a unit whose deferred read would reach the COMMIT, where its rows go unread', async () => {
    const writes = app.get(Writes);
    let xid = '';
    await expect(
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        void unit.withNextRead(statement(sql`SELECT ${1}::int AS n`, (rows: Array<{ n: number }>) => rows[0].n));
      }),
    ).rejects.toThrow('a deferred read reached the COMMIT');

    expect(await statusOf(xid)).toBe('aborted');
  });

  it('rolls back everything, deferred writes included, when a check at the COMMIT raises', async () => {
    const writes = app.get(Writes);
    let xid = '';
    await expect(
      writes.run('round-trips', async (unit: UnitOfWork) => {
        xid = await xidOf(unit.session);
        unit.withNext(statement(sql`SELECT pg_advisory_xact_lock(${7_130_021})`, nothing));
        unit.checkAtCommit(
          statement(sql`SELECT leasehold_lease_lost(${'0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90'}::uuid)`, nothing),
        );
      }),
    ).rejects.toMatchObject({ driverError: { code: 'LL001', detail: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' } });

    expect(await statusOf(xid)).toBe('aborted');
  });

  it('sends nothing for a unit that ran no statement', async () => {
    expect(await roundTripsOf(() => runner.run(undefined, async () => 'nothing'))).toBe(0);
  });

  it('sends BEGIN on its own ahead of a statement without parameters, which may hold several', async () => {
    let rows: unknown;
    const trips = await roundTripsOf(async () => {
      rows = await runner.run(undefined, async (manager) => {
        const xid = (await manager.query('SELECT txid_current()::text AS xid'))[0].xid as string;
        return [xid, await xidOf(manager)];
      });
    });

    const [first, second] = rows as string[];
    expect(second).toBe(first);
    expect(trips).toBe(4);
    expect(await statusOf(first)).toBe('committed');
  });

  it('rolls back a unit whose first statement failed with BEGIN in its round trip, and keeps the connection', async () => {
    const pidBefore = await backendPid();
    await expect(runner.run(undefined, (manager) => manager.query('SELECT 1 / $1::int', [0]))).rejects.toThrow(
      'division by zero',
    );
    // A connection released inside a transaction would have been closed (see connection-hygiene).
    expect(await backendPid()).toBe(pidBefore);
  });

  it('keeps a connection whose first named statement failed to parse behind BEGIN: the statement is parsed again next time', async () => {
    // A temporary table belongs to the session: the statement fails to parse until this connection creates it.
    const probe = (_session: Session, transaction: OpenTransaction) =>
      transaction.rows({
        name: 'round_trips_probe',
        text: 'SELECT count(*)::int AS n FROM pg_temp.round_trips_probe WHERE $1::int = 1',
        values: [1],
      });
    await expect(runner.run(undefined, probe)).rejects.toThrow('does not exist');
    await runner.run(undefined, (manager) => manager.query('CREATE TEMPORARY TABLE round_trips_probe (n int)'));
    try {
      await expect(runner.run(undefined, probe)).resolves.toEqual([{ n: 0 }]);
    } finally {
      await runner.run(undefined, (manager) => manager.query('DROP TABLE pg_temp.round_trips_probe'));
    }
  });

  it('pushes to partitions that exist in two round trips: lock, then rows and NOTIFY with COMMIT', async () => {
    const server = app.getHttpServer();
    const queue = `round-trips-${randomUUID()}`;
    const items = [
      { queue, partition: 'a', payload: { n: 1 } },
      { queue, partition: 'b', payload: { n: 2 } },
    ];
    await request(server).post('/api/v1/push').send({ items }).expect(201);

    let answer: request.Response | undefined;
    const trips = await roundTripsOf(async () => {
      answer = await request(server).post('/api/v1/push').send({ items });
    });

    expect(answer?.status).toBe(201);
    expect(answer?.body).toMatchObject([{ status: 'queued' }, { status: 'queued' }]);
    expect(trips).toBe(2);
    const { rows } = await observer.query(
      `SELECT p.name, p.last_offset::int AS last_offset, count(m.id)::int AS messages
         FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
         LEFT JOIN messages m ON m.tenant_id = p.tenant_id AND m.partition_id = p.id
        WHERE q.name = $1 GROUP BY p.name, p.last_offset ORDER BY p.name`,
      [queue],
    );
    expect(rows).toEqual([
      { name: 'a', last_offset: 2, messages: 2 },
      { name: 'b', last_offset: 2, messages: 2 },
    ]);
  });

  it('pushes items with their own transactionIds in two round trips: the duplicate check goes with the lock', async () => {
    const server = app.getHttpServer();
    const queue = `round-trips-${randomUUID()}`;
    const items = (...ids: string[]) =>
      ids.map((transactionId) => ({ queue, partition: 'a', transactionId, payload: {} }));
    // The first push creates the partition; the second prepares the check on the connection.
    await request(server)
      .post('/api/v1/push')
      .send({ items: items('t1') })
      .expect(201);
    await request(server)
      .post('/api/v1/push')
      .send({ items: items('t2') })
      .expect(201);

    let answer: request.Response | undefined;
    const trips = await roundTripsOf(async () => {
      answer = await request(server)
        .post('/api/v1/push')
        .send({ items: items('t2', 't3') });
    });

    expect(answer?.status).toBe(201);
    expect(answer?.body).toMatchObject([{ status: 'duplicate' }, { status: 'queued' }]);
    expect(trips).toBe(2);
    const { rows } = await observer.query(
      `SELECT m.transaction_id, m.seq::int AS seq FROM messages m
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE q.name = $1 ORDER BY m.seq`,
      [queue],
    );
    expect(rows).toEqual([
      { transaction_id: 't1', seq: 1 },
      { transaction_id: 't2', seq: 2 },
      { transaction_id: 't3', seq: 3 },
    ]);
  });

  it('acks messages of several partitions in two round trips: cursors and offsets with BEGIN, then the update with COMMIT', async () => {
    const server = app.getHttpServer();
    const queue = `round-trips-${randomUUID()}`;
    const popAndAck = async (count: (fn: () => Promise<unknown>) => Promise<number>) => {
      const items = ['a', 'b', 'c'].map((partition, n) => ({ queue, partition, payload: { n } }));
      await request(server).post('/api/v1/push').send({ items }).expect(201);
      const popped = await request(server).get(`/api/v1/pop/queue/${queue}?batch=10&partitions=3`).expect(200);
      const acknowledgments = (popped.body.messages as Array<{ transactionId: string; partitionId: string }>).map(
        ({ transactionId, partitionId }) => ({ transactionId, partitionId, leaseId: popped.body.leaseId }),
      );
      expect(acknowledgments).toHaveLength(3);
      let answer: request.Response | undefined;
      const trips = await count(async () => {
        answer = await request(server).post('/api/v1/ack/batch').send({ acknowledgments });
      });
      expect(answer?.status).toBe(200);
      expect(answer?.body).toMatchObject(acknowledgments.map(() => ({ success: true, leaseReleased: true })));
      return trips;
    };
    // The first ack on a connection parses its statements in the same two round trips.
    expect(await popAndAck(roundTripsOf)).toBe(2);
    expect(await popAndAck(roundTripsOf)).toBe(2);
    const { rows } = await observer.query(
      `SELECT p.name, c.committed_offset::int AS committed, c.lease_id
         FROM consumers c JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE q.name = $1 ORDER BY p.name`,
      [queue],
    );
    expect(rows).toEqual(['a', 'b', 'c'].map((name) => ({ name, committed: 2, lease_id: null })));
  });

  describe('the ack of a batch this process handed out', () => {
    const server = () => app.getHttpServer();

    /** A queue of one partition holding `count` messages, and a pop of `batch` of them. */
    async function popped(count: number, batch: number) {
      const queue = `handed-out-${randomUUID()}`;
      const items = Array.from({ length: count }, (_, n) => ({
        queue,
        partition: 'p',
        transactionId: `m${n}`,
        payload: { n },
      }));
      await request(server()).post('/api/v1/push').send({ items }).expect(201);
      const pop = await request(server()).get(`/api/v1/pop/queue/${queue}?batch=${batch}&leaseSeconds=60`).expect(200);
      const messages = pop.body.messages as Array<{ transactionId: string; partitionId: string; leaseEpoch: number }>;
      const acks = (status = 'completed') =>
        messages.map(({ transactionId, partitionId }) => ({
          transactionId,
          partitionId,
          leaseId: pop.body.leaseId,
          status,
        }));
      return { queue, messages, leaseId: pop.body.leaseId as string, partitionId: messages[0].partitionId, acks };
    }

    async function ackIn(acknowledgments: unknown[]): Promise<{ trips: number; body: unknown[] }> {
      let answer: request.Response | undefined;
      const trips = await roundTripsOf(async () => {
        answer = await request(server()).post('/api/v1/ack/batch').send({ acknowledgments });
      });
      expect(answer?.status).toBe(200);
      return { trips, body: answer!.body as unknown[] };
    }

    /** leasehold_ack_requests_total{path}. */
    const acksBy = async (path: 'claim' | 'moved' | 'lock'): Promise<number> =>
      (await app.get(MetricsService).ackPaths.get()).values.find((value) => value.labels.path === path)?.value ?? 0;

    const cursorOf = async (queue: string) =>
      (
        await observer.query(
          `SELECT c.committed_offset::int AS committed, c.lease_id, c.retry_count
             FROM consumers c JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id WHERE q.name = $1`,
          [queue],
        )
      ).rows[0];

    it('takes one round trip: the cursor held to what the claim left, its update, BEGIN and COMMIT', async () => {
      const claimed = await acksBy('claim');
      for (let round = 0; round < 2; round += 1) {
        const batch = await popped(3, 3);
        const { trips, body } = await ackIn(batch.acks());
        expect(body).toMatchObject([false, false, true].map((leaseReleased) => ({ success: true, leaseReleased })));
        expect(trips).toBe(1);
        expect(await cursorOf(batch.queue)).toEqual({ committed: 3, lease_id: null, retry_count: 0 });
      }
      expect(await acksBy('claim')).toBe(claimed + 2);
    });

    it('keeps the lease of a batch acked in part, as the locking ack does', async () => {
      const batch = await popped(3, 3);
      const { trips, body } = await ackIn(batch.acks().slice(0, 2));
      expect(trips).toBe(1);
      expect(body).toMatchObject([
        { success: true, leaseReleased: false },
        { success: true, leaseReleased: false },
      ]);
      expect(await cursorOf(batch.queue)).toEqual({ committed: 2, lease_id: batch.leaseId, retry_count: 0 });
      // The lease is no longer as its claim left it: the rest is acked on the locked cursor.
      const rest = await ackIn(batch.acks().slice(2));
      expect(rest.trips).toBe(2);
      expect(rest.body).toMatchObject([{ success: true, leaseReleased: true }]);
      expect(await cursorOf(batch.queue)).toEqual({ committed: 3, lease_id: null, retry_count: 0 });
    });

    it('changes nothing and answers as the locking ack when the lease ran out after the claim', async () => {
      const batch = await popped(2, 2);
      await observer.query(
        `UPDATE consumers SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE partition_id = $1`,
        [batch.partitionId],
      );
      const moved = await acksBy('moved');
      const { trips, body } = await ackIn(batch.acks());
      expect(trips).toBe(3);
      expect(await acksBy('moved')).toBe(moved + 1);
      expect(body).toMatchObject([0, 1].map(() => ({ success: false, error: 'invalid or expired lease' })));
      expect(await cursorOf(batch.queue)).toEqual({ committed: 0, lease_id: batch.leaseId, retry_count: 0 });
    });

    it('answers as the locking ack when a message of the batch was deleted after the claim', async () => {
      const batch = await popped(3, 3);
      await observer.query(`DELETE FROM messages WHERE partition_id = $1 AND transaction_id = 'm1'`, [
        batch.partitionId,
      ]);
      const { trips, body } = await ackIn(batch.acks());
      expect(trips).toBe(3);
      expect(body).toMatchObject([
        { success: true },
        { success: false, error: 'message not found in this partition' },
        { success: true, leaseReleased: true },
      ]);
      expect(await cursorOf(batch.queue)).toEqual({ committed: 3, lease_id: null, retry_count: 0 });
    });

    it('answers as the locking ack when the cursor moved after the claim (a seek, another process)', async () => {
      const batch = await popped(3, 3);
      await observer.query(`UPDATE consumers SET committed_offset = 2 WHERE partition_id = $1`, [batch.partitionId]);
      const { trips, body } = await ackIn(batch.acks());
      expect(trips).toBe(3);
      expect(body).toMatchObject([{ success: true }, { success: true }, { success: true, leaseReleased: true }]);
      expect(await cursorOf(batch.queue)).toEqual({ committed: 3, lease_id: null, retry_count: 0 });
    });

    it("locks the cursor for a nack, an epoch that is not the claim's, or a lease another process handed out", async () => {
      const nacked = await popped(2, 2);
      const locked = await acksBy('lock');
      const nack = await ackIn(nacked.acks('failed'));
      expect(nack.trips).toBe(2);
      expect(await acksBy('lock')).toBe(locked + 1);
      // The first hands the batch back and ends the lease the second names.
      expect(nack.body).toMatchObject([
        { success: true, leaseReleased: true },
        { success: false, error: 'invalid or expired lease' },
      ]);
      expect(await cursorOf(nacked.queue)).toMatchObject({ committed: 0, lease_id: null, retry_count: 1 });

      const fenced = await popped(2, 2);
      const stale = fenced.acks().map((ack) => ({ ...ack, leaseEpoch: fenced.messages[0].leaseEpoch + 1 }));
      const refused = await ackIn(stale);
      expect(refused.trips).toBe(2);
      expect(refused.body).toMatchObject([0, 1].map(() => ({ success: false, error: 'invalid or expired lease' })));

      const other = await popped(2, 2);
      app.get(HandedOutLeases).forget(await tenantOf(other.queue), other.leaseId);
      const another = await ackIn(other.acks());
      expect(another.trips).toBe(2);
      expect(another.body).toMatchObject([{ success: true }, { success: true, leaseReleased: true }]);
    });

    const tenantOf = async (queue: string): Promise<string> =>
      (await observer.query(`SELECT tenant_id FROM queues WHERE name = $1`, [queue])).rows[0].tenant_id as string;

    it('sends the redelivery notice itself, as notices() writes it, when messages wait past the released lease', async () => {
      const listener = await openSession();
      const heard: string[] = [];
      listener.on('notification', (message) => {
        if (message.channel === REDELIVERY_CHANNEL) heard.push(message.payload ?? '');
      });
      await listener.query(`LISTEN ${REDELIVERY_CHANNEL}`);
      try {
        const batch = await popped(5, 2);
        const { trips } = await ackIn(batch.acks());
        expect(trips).toBe(1);
        // Nothing waits past this one: no notice.
        const last = await request(server()).get(`/api/v1/pop/queue/${batch.queue}?batch=10`).expect(200);
        const drained = (last.body.messages as Array<{ transactionId: string; partitionId: string }>).map(
          ({ transactionId, partitionId }) => ({ transactionId, partitionId, leaseId: last.body.leaseId }),
        );
        expect((await ackIn(drained)).trips).toBe(1);
        await listener.query('SELECT 1');
        const tenantId = await tenantOf(batch.queue);
        const [expected] = app
          .get(WakeupChannel)
          .notices(tenantId, new Map(), [
            { queue: batch.queue, consumerGroup: '__QUEUE_MODE__', partitions: new Map([['p', 3]]) },
          ]);
        expect(heard).toEqual([expected.payload]);
      } finally {
        await listener.end();
      }
    });
  });

  it('pops in two round trips the first time it finds its group ready, and in one from then on: BEGIN, a look at the queue, the claim and COMMIT', async () => {
    const server = app.getHttpServer();
    const queue = `round-trips-${randomUUID()}`;
    const push = () =>
      request(server)
        .post('/api/v1/push')
        .send({ items: [{ queue, partition: 'a', payload: {} }] })
        .expect(201);
    await push();
    await request(server).get(`/api/v1/pop/queue/${queue}?autoAck=true`).expect(200);

    const trips: number[] = [];
    const leases: string[] = [];
    for (let pop = 0; pop < 3; pop += 1) {
      await push();
      let answer: request.Response | undefined;
      trips.push(
        await roundTripsOf(async () => {
          answer = await request(server).get(`/api/v1/pop/queue/${queue}?autoAck=${pop < 2}`);
        }),
      );
      expect(answer?.status).toBe(200);
      leases.push(answer?.body.leaseId);
    }

    expect(trips).toEqual([2, 1, 1]);
    const { rows } = await observer.query(
      `SELECT c.lease_id FROM consumers c JOIN queues q ON q.tenant_id = c.tenant_id AND q.id = c.queue_id
        WHERE q.name = $1`,
      [queue],
    );
    expect(rows).toEqual([{ lease_id: leases[2] }]);
  });

  it('runs one statement with its BEGIN and COMMIT in one round trip, and keeps the connection when it fails', async () => {
    const once = (divisor: number) =>
      runner.runOne(
        undefined,
        prepared(
          'round_trips_run_one',
          sql`SELECT txid_current()::text AS xid, 1 / ${divisor}::int AS one`,
          (rows: Array<{ xid: string }>) => rows[0].xid,
        ),
      );
    await once(1);
    let xid = '';
    expect(await roundTripsOf(async () => (xid = await once(1)))).toBe(1);
    expect(await statusOf(xid)).toBe('committed');

    const pidBefore = await backendPid();
    // The failed statement's round trip, then the ROLLBACK that leaves the connection clean for the pool.
    expect(await roundTripsOf(() => expect(once(0)).rejects.toThrow('division by zero'))).toBe(2);
    expect(await backendPid()).toBe(pidBefore);
    expect(await roundTripsOf(async () => (xid = await once(1)))).toBe(1);
    expect(await statusOf(xid)).toBe('committed');
  });

  it('sends the last statement of a read with its COMMIT, and runs nothing after it', async () => {
    const xid = prepared(
      'round_trips_read_xid',
      sql`SELECT txid_current()::text AS xid WHERE ${1}::int = 1`,
      (rows: Array<{ xid: string }>) => rows[0].xid,
    );
    const read = () => runner.read(undefined, async (reader) => [await reader.run(xid), await reader.last(xid)]);
    await read();
    let xids: string[] = [];
    expect(await roundTripsOf(async () => (xids = await read()))).toBe(2);
    expect(xids[0]).toBe(xids[1]);
    expect(await statusOf(xids[0])).toBe('committed');

    await expect(
      runner.read(undefined, async (reader) => {
        await reader.last(xid);
        return reader.run(xid);
      }),
    ).rejects.toThrow('a read runs nothing after its last statement');
  });

  it("reads a stream's state in one round trip, whether it keeps any or the query is unknown", async () => {
    const server = app.getHttpServer();
    const queue = `round-trips-${randomUUID()}`;
    await request(server)
      .post('/api/v1/push')
      .send({ items: [{ queue, partition: 'a', payload: {} }] })
      .expect(201);
    const registered = await request(server)
      .post('/streams/v1/queries')
      .send({ name: queue, source_queue: queue, config_hash: 'h' })
      .expect(200);
    const read = (queryId: string) =>
      request(server).post('/streams/v1/state/get').send({ query_id: queryId, partition_id: randomUUID(), keys: [] });
    await read(registered.body.query_id).expect(200);

    let answers: number[] = [];
    const trips = await roundTripsOf(async () => {
      answers = [(await read(registered.body.query_id)).status, (await read(uuidv7())).status];
    });
    expect(answers).toEqual([200, 404]);
    expect(trips).toBe(2);
  });
});

// Counted on either database: the embedded one sends BEGIN on its own and each statement apart, a fixed number more.
describe('a transaction’s round trips do not grow with its operations', () => {
  let app: NestExpressApplication;
  let pool: Pool;

  beforeAll(async () => {
    app = await createTestApp({ DB_POOL_SIZE: '1', JWT_ENABLED: 'false' });
    pool = app.get(Database).pool;
    await app.get(MaintenanceService).onApplicationShutdown();
  });

  afterAll(() => app.close());

  // Counted on the wire: the embedded database takes BEGIN and each statement on their own.
  (onEmbeddedDatabase ? it.skip : it)(
    "commits a pipeline stage's transaction in two round trips: leases, the acks' reads and the push's lock, then the rest with COMMIT",
    async () => {
      const client = new BrokerClient(app, newTenant());
      await client.pushMany('stage-in', 20);
      await client.push([{ queue: 'stage-out', partition: 'p', payload: 'seed' }]).expect(201);
      const stage = async (batch: number) => {
        const pop = await client.popLeased('stage-in', { batch });
        const operations = [
          ...pop.messages.map((message) => ({
            type: 'ack',
            transactionId: message.transactionId,
            partitionId: message.partitionId,
            leaseId: pop.leaseId,
            leaseEpoch: message.leaseEpoch,
          })),
          {
            type: 'push',
            items: pop.messages.map((message) => ({
              queue: 'stage-out',
              partition: 'p',
              transactionId: `out-${message.transactionId}`,
              payload: 1,
            })),
          },
        ];
        let answer: request.Response | undefined;
        const trips = await roundTripsOn(pool, async () => {
          answer = await client.post('/api/v1/transaction', { operations, requiredLeases: [pop.leaseId] });
        });
        expect(answer?.body.success).toBe(true);
        return trips;
      };
      // The first prepares the statements on the connection.
      await stage(10);

      expect(await stage(10)).toBe(2);
    },
  );

  // Counted on the wire, as above.
  (onEmbeddedDatabase ? it.skip : it)(
    'runs a stream cycle of an ack, a state write and pushes in two round trips, as a transaction of the ack and the pushes',
    async () => {
      const client = new BrokerClient(app, newTenant());
      const registered = await client
        .post('/streams/v1/queries', {
          name: 'sums',
          source_queue: 'cycle-in',
          sink_queue: 'cycle-out',
          config_hash: 'a'.repeat(64),
        })
        .expect(200);
      const queryId = registered.body.query_id as string;
      const group = `streams.${queryId}`;
      await client.pushMany('cycle-in', 20);
      await client.push([{ queue: 'cycle-out', partition: 'p', payload: 'seed' }]).expect(201);
      const cycle = async () => {
        const pop = await client.popLeased('cycle-in', { batch: 5, consumerGroup: group });
        const last = pop.messages[pop.messages.length - 1];
        let answer: request.Response | undefined;
        const trips = await roundTripsOn(pool, async () => {
          answer = await client.post('/streams/v1/cycle', {
            query_id: queryId,
            partition_id: last.partitionId,
            consumer_group: group,
            state_ops: [{ type: 'upsert', key: 'sum', value: { last: last.transactionId } }],
            push_items: pop.messages.map(() => ({ queue: 'cycle-out', partition: 'p', payload: 1 })),
            ack: { transactionId: last.transactionId, leaseId: pop.leaseId, status: 'completed', count: 5 },
          });
        });
        expect([answer?.status, answer?.body.success]).toEqual([200, true]);
        return trips;
      };
      // The first prepares the statements on the connection.
      await cycle();

      expect(await cycle()).toBe(2);
    },
  );

  it('commits 1,000 alternating pushes and acks of other partitions in as many round trips as 10', async () => {
    const client = new BrokerClient(app, newTenant());
    await client.pushMany('in', 600);
    const pop = await client.popLeased('in', { batch: 600 });
    expect(pop.messages).toHaveLength(600);
    // Every output partition already exists, as a pipeline's do once it runs.
    const seeds = Array.from({ length: 500 }, (_, n) => ({ queue: 'out', partition: `p${n}`, payload: 'seed' }));
    expect((await client.push(seeds)).status).toBe(201);
    /** `pairs` of a push to partition p<n> and an ack of the next popped message, from message `from` on. */
    const alternation = (from: number, pairs: number) =>
      pop.messages.slice(from, from + pairs).flatMap((message, n) => [
        { type: 'push', items: [{ queue: 'out', partition: `p${n}`, transactionId: `o-${from + n}`, payload: n }] },
        {
          type: 'ack',
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: pop.leaseId,
          leaseEpoch: message.leaseEpoch,
        },
      ]);
    const commit = (operations: unknown[]) =>
      client.post('/api/v1/transaction', { operations, requiredLeases: [pop.leaseId] }).then((response) => response);
    // The first prepares the statements on the connection.
    expect((await commit(alternation(0, 5))).body.success).toBe(true);

    let small: request.Response | undefined;
    let large: request.Response | undefined;
    const smallTrips = await roundTripsOn(pool, async () => (small = await commit(alternation(5, 5))));
    const largeTrips = await roundTripsOn(pool, async () => (large = await commit(alternation(10, 500))));

    expect(small?.body.success).toBe(true);
    expect(large?.body.success).toBe(true);
    expect(large?.body.results).toHaveLength(1_000);
    expect(largeTrips).toBe(smallTrips);
    expect(smallTrips).toBeLessThanOrEqual(12);
    expect(await storedCounts(app.get(Database), client.tenant)).toMatchObject({ messages: 600 + 500 + 510 });
    expect(await cursors(app.get(Database), client.tenant, 'in')).toMatchObject([
      { committedOffset: 510, leaseId: pop.leaseId, leaseLive: true },
    ]);
  });
});
