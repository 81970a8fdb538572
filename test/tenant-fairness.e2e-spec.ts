import type { IncomingMessage } from 'node:http';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import request from 'supertest';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { UNIDENTIFIED } from '../src/http/fair-dispatch';
import { LeaseholdHttpAdapter } from '../src/http/http-adapter';
import { PopRepository } from '../src/pop/pop.repository';
import { BrokerClient } from './support/broker-client';
import { createLease } from './support/lease-fixture';
import { lockTenantRows, openSession } from './support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';
import { CapturedLogs } from './faults/support/captured-logs';
import { waitFor, within } from './support/wait';

type Answer = request.Response;

describe('one tenant cannot starve another', () => {
  describe('rate limits per tenant and route class', () => {
    let app: NestExpressApplication;

    beforeAll(async () => {
      app = await createTestApp({ RATE_LIMIT_PRODUCE: '5', RATE_LIMIT_RENEW: '0' });
    });

    afterAll(async () => {
      await app.close();
    });

    it("answers a tenant's pushes past RATE_LIMIT_PRODUCE per second with 429 and Retry-After; other tenants and other classes go on", async () => {
      const noisy = new BrokerClient(app, newTenant());
      const quiet = new BrokerClient(app, newTenant());
      const lease = await createLease(app, noisy.tenant, [30]);

      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, n) => noisy.push([{ queue: 'flood', payload: n }]).then((response) => response)),
      );
      const refused = answers.filter((answer) => answer.status === 429);

      expect(answers.filter((answer) => answer.status === 201)).toHaveLength(5);
      expect(refused).toHaveLength(3);
      for (const answer of refused) {
        expect(answer.body).toEqual({ error: 'too many requests' });
        expect(Number(answer.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      expect((await quiet.push([{ queue: 'calm', payload: 1 }])).status).toBe(201);
      expect((await noisy.extend(lease.leaseId, 30)).body).toMatchObject({ renewed: 1 });
      // A new second, a new budget.
      await waitFor(
        async () => (await noisy.push([{ queue: 'flood', payload: 'later' }])).status === 201,
        'the next second',
      );
    });
  });

  describe('long polls', () => {
    let app: NestExpressApplication;

    beforeAll(async () => {
      app = await createTestApp({ POP_MAX_WAITING_PER_TENANT: '20' });
    });

    afterAll(async () => {
      await app.close();
    });

    /** `count` parked polls, each answered when its consumer group row shows it reached the broker. */
    async function park(
      client: BrokerClient,
      queue: string,
      count: number,
      timeout = 10_000,
    ): Promise<Array<Promise<Answer>>> {
      const polls = Array.from({ length: count }, () =>
        client.pop(queue, { wait: true, timeout, batch: 1 }).then((response) => response),
      );
      return polls;
    }

    it('refuses polls past POP_MAX_WAITING_PER_TENANT with 429 at once, leaving other tenants able to park', async () => {
      const greedy = new BrokerClient(app, newTenant());
      const other = new BrokerClient(app, newTenant());
      await greedy.configure({ queue: 'idle' });
      await other.configure({ queue: 'idle' });

      const polls = await park(greedy, 'idle', 25, 3_000);
      const refused: Answer[] = [];
      await waitFor(async () => {
        const settled = await Promise.all(polls.map((poll) => Promise.race([poll, Promise.resolve(undefined)])));
        refused.splice(0, refused.length, ...settled.filter((answer): answer is Answer => answer?.status === 429));
        return refused.length === 5;
      }, 'five polls refused');
      for (const answer of refused) {
        expect(answer.body).toEqual({ error: 'too many waiting pops' });
        expect(answer.headers['retry-after']).toBe('1');
      }

      const [otherPoll] = await park(other, 'idle', 1);
      await other.pushMany('idle', 1);
      expect((await otherPoll).status).toBe(200);
      const answered = await Promise.all(polls);
      expect(answered.filter((answer) => answer.status === 204)).toHaveLength(20);
    });

    it('wakes only as many parked polls as a push brings messages, and those five get them', async () => {
      const client = new BrokerClient(app, newTenant());
      await client.configure({ queue: 'work' });
      const claims = jest.spyOn(app.get(PopRepository), 'claim');
      const polls = await park(client, 'work', 15, 5_000);
      await waitFor(() => claims.mock.calls.length >= 15, 'every poll looked once');
      claims.mockClear();

      await client.push(Array.from({ length: 5 }, (_, n) => ({ queue: 'work', partition: `p${n}`, payload: n })));
      const answered = await Promise.all(polls);

      expect(answered.filter((answer) => answer.status === 200)).toHaveLength(5);
      expect(answered.filter((answer) => answer.status === 204)).toHaveLength(10);
      expect(claims.mock.calls).toHaveLength(5);
      claims.mockRestore();
    });
  });

  // Connections held by a tenant's blocked transactions: real PostgreSQL only.
  (onEmbeddedDatabase ? describe.skip : describe)('the pool, on real PostgreSQL', () => {
    let app: NestExpressApplication;
    let blocker: Client;
    let observer: Client;

    beforeAll(async () => {
      // A pool of 4 of which one tenant may hold 3.
      app = await createTestApp({ DB_POOL_SIZE: '4', DB_ACQUIRE_TIMEOUT_MS: '1000', DB_STATEMENT_TIMEOUT_MS: '10000' });
      blocker = await openSession();
      observer = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await observer.end();
      await app.close();
    });

    it("lets another tenant's push through while one tenant holds its whole share of the pool; that tenant's next waits and gets pool", async () => {
      const greedy = new BrokerClient(app, newTenant());
      const other = new BrokerClient(app, newTenant());
      await greedy.pushMany('hot', 1);
      await lockTenantRows(blocker, 'partitions', greedy.tenant);
      try {
        const stuck = Array.from({ length: 3 }, (_, n) =>
          greedy.push([{ queue: 'hot', payload: n }]).then((response) => response),
        );
        await waitFor(async () => {
          const { rows } = await observer.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%AS t(queue_name, name)%'",
          );
          return rows[0].n === 3;
        }, "the greedy tenant's three pushes wait on the partition lock");

        const started = Date.now();
        const [overShare, otherPush] = await Promise.all([
          greedy.push([{ queue: 'hot', payload: 'fourth' }]).then((response) => response),
          other.push([{ queue: 'calm', payload: 1 }]).then((response) => response),
        ]);

        expect(otherPush.status).toBe(201);
        expect(overShare.status).toBe(500);
        expect(overShare.body).toEqual({ error: 'pool' });
        expect(Date.now() - started).toBeLessThan(1_000 + 3_000);
        await blocker.query('ROLLBACK');
        expect((await Promise.all(stuck)).map((answer) => answer.status)).toEqual([201, 201, 201]);
      } finally {
        await blocker.query('ROLLBACK').catch(() => undefined);
      }
    });

    it("keeps another tenant's one-row renewals answered while one tenant renews 20 leases of 500 partitions, 40 at a time", async () => {
      const heavy = new BrokerClient(app, newTenant());
      const light = new BrokerClient(app, newTenant());
      const partitions = Array.from({ length: 10_000 }, (_, index) => ({
        queue: 'wide',
        partition: `w${index}`,
        payload: index,
      }));
      expect((await heavy.push(partitions)).status).toBe(201);
      const wide: string[] = [];
      for (let lease = 0; lease < 20; lease += 1) {
        wide.push((await heavy.pop('wide', { partitions: 500, batch: 500, leaseSeconds: 600 })).body.leaseId);
      }
      const lease = await createLease(app, light.tenant, [600]);

      let running = true;
      let next = 0;
      const heavyAnswers: number[] = [];
      const flood = Array.from({ length: 40 }, async () => {
        while (running) heavyAnswers.push((await heavy.extend(wide[next++ % wide.length], 600)).status);
      });
      // Counted, not timed: a starved renewal shows as a 500 pool after the 1 s acquire timeout.
      await waitFor(() => heavyAnswers.length > 0, 'the flood is answered');
      const heavyBefore = heavyAnswers.length;
      const lightAnswers: Answer[] = [];
      while (lightAnswers.length < 15 || heavyAnswers.length < heavyBefore + 5) {
        lightAnswers.push(await light.extend(lease.leaseId, 600));
      }
      running = false;
      await Promise.all(flood);

      expect(lightAnswers.filter((answer) => answer.status !== 200 || answer.body.renewed !== 1)).toEqual([]);
      expect(heavyAnswers.filter((status) => status !== 200)).toEqual([]);
    }, 120_000);

    it('keeps a woken long poll from answering 5xx when no connection is free: it retries and delivers', async () => {
      const logs = new CapturedLogs();
      // Created first: Nest's logger is global, and the last application to start sets it.
      const pusher = await createTestApp({});
      const small = await createTestApp({ DB_POOL_SIZE: '1', DB_ACQUIRE_TIMEOUT_MS: '300' }, {}, (created) =>
        created.useLogger(logs),
      );
      let held: HeldConnection | undefined;
      try {
        const consumer = new BrokerClient(small, newTenant());
        const producer = new BrokerClient(pusher, consumer.tenant);
        await consumer.configure({ queue: 'later' });
        const claims = jest.spyOn(small.get(PopRepository), 'claim');
        const poll = consumer.pop('later', { wait: true, timeout: 15_000 }).then((response) => response);
        await waitFor(() => claims.mock.calls.length === 1, 'the poll looked once and parked');
        // Take the small broker's only connection, then push through the other broker: NOTIFY wakes the poll.
        held = new HeldConnection(small.get(Database));
        await held.connect();
        await producer.pushMany('later', 1);
        await waitFor(
          () => logs.at('warn').some((entry) => entry.message.includes('could not claim')),
          'the woken poll fails to get a connection',
        );
        await held.release();
        held = undefined;

        const answer = await poll;
        expect(answer.status).toBe(200);
        expect(answer.body.messages).toHaveLength(1);
        claims.mockRestore();
      } finally {
        await held?.release();
        await small.close();
        await pusher.close();
      }
    });
  });

  // Row locks held by a tenant's own transaction: real PostgreSQL only.
  (onEmbeddedDatabase ? describe.skip : describe)('renewals beside a tenant whose rows are locked', () => {
    let app: NestExpressApplication;
    let blocker: Client;

    beforeAll(async () => {
      // Long enough that a renewal waiting for the lock could not finish before the lock is released.
      app = await createTestApp({ DB_STATEMENT_TIMEOUT_MS: '60000' });
      blocker = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await app.close();
    });

    it("renews another tenant's leases while one tenant's cursor rows are locked, and answers that tenant busy at once", async () => {
      const locked = new BrokerClient(app, newTenant());
      const other = new BrokerClient(app, newTenant());
      const held = [await createLease(app, locked.tenant, [30, 30]), await createLease(app, locked.tenant, [30])];
      const lease = await createLease(app, other.tenant, [30]);
      await lockTenantRows(blocker, 'consumers', locked.tenant);
      const lockedAnswers: Answer[] = [];
      let running = true;
      try {
        // Two loops per lease: more renewals than there are renewal slots, each of a locked lease.
        const loops = [...held, ...held].map(async ({ leaseId }) => {
          while (running) lockedAnswers.push(await locked.extend(leaseId, 30));
        });
        const answers = await within(
          (async () => {
            const all: Answer[] = [];
            while (all.length < 10 || lockedAnswers.length < 4) all.push(await other.extend(lease.leaseId, 30));
            return all;
          })(),
          "the other tenant's renewals while the rows are locked",
          20_000,
        );
        running = false;
        await within(Promise.all(loops), "the locked tenant's renewals while its rows are still locked", 20_000);

        expect(answers.filter((answer) => answer.status !== 200 || answer.body.renewed !== 1)).toEqual([]);
        expect(answers.filter((answer) => answer.headers['leasehold-lease-status'] !== undefined)).toEqual([]);
        expect(lockedAnswers.length).toBeGreaterThanOrEqual(4);
        for (const answer of lockedAnswers) {
          expect(answer.status).toBe(200);
          expect(answer.body).toMatchObject({ success: false, renewed: 0, newExpiresAt: null });
          expect(answer.headers['leasehold-lease-status']).toBe('busy');
          expect(Number(answer.headers['leasehold-renew-after'])).toBeGreaterThan(0);
          expect(Number(answer.headers['leasehold-renew-after'])).toBeLessThanOrEqual(0.25);
        }
      } finally {
        running = false;
        await blocker.query('ROLLBACK');
      }
      const renewedAfter = await locked.extend(held[0].leaseId, 30);
      expect(renewedAfter.body.renewed).toBe(2);
      expect(renewedAfter.headers['leasehold-lease-status']).toBeUndefined();
    });

    it('renews the rows of a lease that are free and answers busy for the one a transaction holds', async () => {
      const client = new BrokerClient(app, newTenant());
      const lease = await createLease(app, client.tenant, [30, 30]);
      // The broker learns the lease's size from a renewal.
      expect((await client.extend(lease.leaseId, 30)).body.renewed).toBe(2);
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM consumers WHERE tenant_id = $1 AND partition_id = $2 FOR UPDATE', [
        client.tenant,
        lease.partitionIds[0],
      ]);
      try {
        const answer = await within(
          client.extend(lease.leaseId, 30).then((response) => response),
          'the renewal',
          20_000,
        );
        expect(answer.body).toMatchObject({ success: true, renewed: 1 });
        expect(answer.headers['leasehold-lease-status']).toBe('busy');
        expect(Number(answer.headers['leasehold-renew-after'])).toBeLessThanOrEqual(0.25);
      } finally {
        await blocker.query('ROLLBACK');
      }
    });
  });

  describe("a request's turn", () => {
    let app: NestExpressApplication;

    beforeAll(async () => {
      app = await createTestApp({ JWT_ENABLED: 'true', JWT_ALGORITHM: 'HS256', JWT_SECRET: TEST_JWT_SECRET });
    });

    afterAll(async () => {
      await app.close();
    });

    it("waits in its tenant's queue once a request with the same token passed the guard, never before", async () => {
      const dispatch = (app.getHttpAdapter() as LeaseholdHttpAdapter).dispatch;
      const tenant = newTenant();
      const token = `Bearer ${hsToken({ role: 'read-write', tenant })}`;
      const forged = `Bearer ${hsToken({ role: 'read-write', tenant }, {}, 'some-other-secret-of-enough-length')}`;
      const as = (authorization: string) => ({ headers: { authorization } }) as unknown as IncomingMessage;
      expect(dispatch.tenantOf(as(token))).toBe(UNIDENTIFIED);

      await request(app.getHttpServer()).get('/api/v1/pop/queue/nothing').set('authorization', forged).expect(401);
      expect(dispatch.tenantOf(as(forged))).toBe(UNIDENTIFIED);
      await request(app.getHttpServer()).get('/api/v1/pop/queue/nothing').set('authorization', token).expect(204);
      expect(dispatch.tenantOf(as(token))).toBe(tenant);
      expect(dispatch.tenantOf(as(forged))).toBe(UNIDENTIFIED);
    });
  });
});
