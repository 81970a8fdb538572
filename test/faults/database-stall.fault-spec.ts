import { randomUUID } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { openSession } from '../support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor, within } from '../support/wait';
import { consumedAll, orphanedTransactions } from './support/ledger';
import { Call, Route, Workload } from './support/workload';

jest.setTimeout(120_000);

// Short timeouts keep the suite quick; FAULT_* run it with production ones, e.g.
// FAULT_STALL_MS=13000 FAULT_STATEMENT_TIMEOUT_MS=5000 FAULT_ACQUIRE_TIMEOUT_MS=2000.
const STATEMENT_TIMEOUT_MS = Number(process.env.FAULT_STATEMENT_TIMEOUT_MS ?? 1_000);
const ACQUIRE_TIMEOUT_MS = Number(process.env.FAULT_ACQUIRE_TIMEOUT_MS ?? 1_000);
/** The documented bound: the acquire timeout, then the statement timeout plus the 1 s client margin. */
const BOUND_MS = ACQUIRE_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 1_000;
/**
 * Longer than two statement budgets (the old client-side timeout fired, then ROLLBACK's did too), and long enough
 * that an answer within its bound and one that waited for the database to come back are seconds apart.
 */
const STALL_MS = Number(process.env.FAULT_STALL_MS ?? 12_000);
/**
 * Timers and the event loop run seconds late on a busy machine: what is checked is that every request answers
 * while the database is still stalled, not waiting for it, so the slack is what the stall leaves past the bound.
 */
const SLACK_MS = Math.max(1_500, STALL_MS - BOUND_MS - 1_000);

const ALLOWED_FAILURES: Record<Route, string[]> = {
  push: ['pool', 'database timeout'],
  pop: ['pool', 'database timeout'],
  ack: ['pool', 'database timeout'],
  extend: ['pool', 'renew failed: database timeout'],
  health: ['database unavailable'],
};

const scenarios: Array<[string, string | RegExp, Partial<{ extend: boolean; nackEvery: number }>]> = [
  // Prepared statements are matched by name: after a connection's first call only the name is sent.
  ['a push, caught mid-INSERT', 'leasehold_store_pushed', { nackEvery: 7 }],
  ['a pop, caught in its claim', 'leasehold_claim', { nackEvery: 7 }],
  ['an ack, caught saving the batch it was handed', 'leasehold_ack_save_handed_out', {}],
  ['a nack, caught locking its cursors', 'leasehold_ack_lock', { nackEvery: 2 }],
  ['an extend, caught in its renewal', 'leasehold_renew', { extend: true }],
];

(onEmbeddedDatabase ? describe.skip : describe)(
  'a database that stops answering (network partition) on real PostgreSQL',
  () => {
    const databaseUrl = process.env.DATABASE_URL!;
    /** Tells this file's broker sessions apart from those of tests running beside it. */
    const applicationName = `leasehold-${randomUUID().slice(0, 8)}`;
    let proxy: TcpProxy;
    /** Stopped after each test, also when it failed half-way. */
    let running: Workload | undefined;
    let app: NestExpressApplication;
    let db: Client;

    beforeEach(async () => {
      proxy = TcpProxy.forDatabaseUrl(databaseUrl);
      await proxy.start();
      app = await createTestApp({
        DATABASE_URL: `${proxy.rewrite(databaseUrl)}?application_name=${applicationName}`,
        DB_POOL_SIZE: '4',
        DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
        DB_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS),
      });
      await app.listen(0, '127.0.0.1');
      db = await openSession(databaseUrl);
    });

    afterEach(async () => {
      await running?.stop();
      running = undefined;
      proxy.heal();
      await app.close();
      await proxy.stop();
      await db.end();
    });

    it.each(scenarios)(
      `%s for ${STALL_MS / 1000} s, then a burst on heal: every request answers within its bound, nothing 201 is lost or doubled, order holds, the partitions keep taking pushes`,
      async (_scenario, statement, options) => {
        const tenant = newTenant();
        const queue = 'stalled';
        const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
        const workload = new Workload({
          brokers: [base],
          tenantHeader: TENANT_HEADER,
          tenant,
          queue,
          partitions: 4,
          messagesPerPartition: 25,
          consumers: 3,
          leaseSeconds: 3,
          pushIntervalMs: 40,
          ...options,
        });
        running = workload;
        // Enough retries that a run's nacks never dead-letter a message.
        await fetch(`${base}/api/v1/configure`, {
          method: 'POST',
          headers: { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
          body: JSON.stringify({ queue, options: { retryLimit: 1000 } }),
        });
        workload.start();
        await waitFor(() => workload.acksSucceeded >= 5, 'the workload gets going');

        await within(proxy.stallWhen(statement), 'the statement is caught');
        const stalledAt = performance.now();
        const health = fetch(`${base}/health`).then(async (response) => ({
          status: response.status,
          body: await response.json(),
          answeredAt: performance.now(),
        }));
        await sleepUntil(stalledAt + STALL_MS);
        proxy.heal();
        const healedAt = performance.now();

        await workload.burst(20);
        await workload.producersFinished();
        await waitFor(() => consumedAll(db, tenant, queue), 'every message consumed', 60_000);
        await workload.stop();

        const during = workload.callsSentBetween(stalledAt, healedAt);
        expect(during.filter((call) => call.status !== undefined && call.status >= 500).length).toBeGreaterThan(0);
        expect(during.filter((call) => call.answeredAt - call.sentAt > BOUND_MS + SLACK_MS)).toEqual([]);
        expect(during.filter((call) => call.error !== undefined)).toEqual([]);
        const unexpected = during.filter(
          (call) =>
            call.status! >= 400 &&
            (call.status !== 500 ||
              !ALLOWED_FAILURES[call.route].includes((call.body as { error?: string })?.error ?? '')),
        );
        expect(unexpected).toEqual([]);
        const healthAnswer = await health;
        expect(healthAnswer.status).toBe(503);
        expect(healthAnswer.body).toEqual({ error: 'database unavailable' });
        expect(healthAnswer.answeredAt - stalledAt).toBeLessThan(BOUND_MS + SLACK_MS);

        // Once the network is back, nothing it left behind (an open transaction, a lock) gets in the way.
        // The burst of 20 on a pool of 4 may still be refused `pool`; a lock left behind would time out.
        const pushesAfterHeal = workload.calls.filter(
          (call) => call.route === 'push' && call.sentAt > healedAt + 1_000,
        );
        expect(
          pushesAfterHeal.filter(
            (call: Call) => call.status !== 201 && (call.body as { error?: string })?.error !== 'pool',
          ),
        ).toEqual([]);
        expect(await workload.ledger.problems(db, tenant, queue)).toEqual([]);
        expect(await orphanedTransactions(db, applicationName)).toBe(0);
        for (const partition of ['p0', 'p1', 'p2', 'p3']) {
          const sentAt = performance.now();
          const response = await fetch(`${base}/api/v1/push`, {
            method: 'POST',
            headers: { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
            body: JSON.stringify({ items: [{ queue, partition, payload: 'after' }] }),
          });
          expect({ partition, status: response.status }).toEqual({ partition, status: 201 });
          expect(performance.now() - sentAt).toBeLessThan(BOUND_MS + SLACK_MS);
        }
      },
    );
  },
);

function sleepUntil(at: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));
}
