import { randomUUID } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { openSession } from '../support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';
import { waitFor, within } from '../support/wait';
import { CapturedLogs } from './support/captured-logs';
import { consumedAll, orphanedTransactions } from './support/ledger';
import { Route, Workload } from './support/workload';

jest.setTimeout(120_000);

const STATEMENT_TIMEOUT_MS = 1_000;
const ACQUIRE_TIMEOUT_MS = 1_000;
const BOUND_MS = ACQUIRE_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + 1_000;
const SLACK_MS = 1_500;

(onEmbeddedDatabase ? describe.skip : describe)('a database that crashes or is recovering, on real PostgreSQL', () => {
  const databaseUrl = process.env.DATABASE_URL!;
  /** Tells this file's broker sessions apart from those of tests running beside it. */
  const applicationName = `leasehold-${randomUUID().slice(0, 8)}`;
  let proxy: TcpProxy;
  /** Stopped after each test, also when it failed half-way. */
  let running: Workload | undefined;
  let app: NestExpressApplication;
  let logs: CapturedLogs;
  let db: Client;
  let base: string;

  beforeEach(async () => {
    proxy = TcpProxy.forDatabaseUrl(databaseUrl);
    await proxy.start();
    logs = new CapturedLogs();
    app = await createTestApp(
      {
        DATABASE_URL: `${proxy.rewrite(databaseUrl)}?application_name=${applicationName}`,
        DB_POOL_SIZE: '4',
        DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
        DB_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS),
      },
      {},
      (created) => created.useLogger(logs),
    );
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    db = await openSession(databaseUrl);
  });

  afterEach(async () => {
    await running?.stop();
    running = undefined;
    await app.close();
    await proxy.stop();
    await db.end();
  });

  function workloadFor(tenant: string, queue: string, extend = false): Workload {
    return new Workload({
      brokers: [base],
      tenantHeader: TENANT_HEADER,
      tenant,
      queue,
      partitions: 4,
      messagesPerPartition: 20,
      consumers: 3,
      leaseSeconds: 3,
      pushIntervalMs: 30,
      nackEvery: extend ? undefined : 6,
      extend,
    });
  }

  async function configure(tenant: string, queue: string): Promise<void> {
    await fetch(`${base}/api/v1/configure`, {
      method: 'POST',
      headers: { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
      body: JSON.stringify({ queue, options: { retryLimit: 1000 } }),
    });
  }

  /** Every message consumed exactly once and in order, no transaction left open, and the faults logged only as warnings. */
  async function expectLedgerAndLogs(workload: Workload, tenant: string, queue: string): Promise<void> {
    await workload.producersFinished();
    await waitFor(() => consumedAll(db, tenant, queue), 'every message consumed', 60_000);
    await workload.stop();
    expect(await workload.ledger.problems(db, tenant, queue)).toEqual([]);
    expect(await orphanedTransactions(db, applicationName)).toBe(0);
    expect(
      workload.calls.filter((call) => (call.body as { error?: string } | undefined)?.error === 'internal error'),
    ).toEqual([]);
    expect(logs.at('error')).toEqual([]);
  }

  it.each<[string, string, Route, string]>([
    // Prepared statements are matched by name: after a connection's first call only the name is sent.
    ['a push', 'leasehold_store_pushed', 'push', 'pool'],
    ['a pop', 'leasehold_claim', 'pop', 'pool'],
    ['an ack', 'leasehold_ack_lock', 'ack', 'pool'],
    ['an extend', 'leasehold_renew', 'extend', 'pool'],
  ])(
    'answers %s whose connection is reset mid-statement with 500 %s within its bound, logs a warning, and loses nothing',
    async (_case, statement, route, body) => {
      const tenant = newTenant();
      const queue = 'reset';
      await configure(tenant, queue);
      const workload = (running = workloadFor(tenant, queue, route === 'extend'));
      workload.start();
      await waitFor(() => workload.acksSucceeded >= 3, 'the workload gets going');

      await within(proxy.resetWhen(statement), 'the statement is caught');
      const resetAt = performance.now();
      await waitFor(
        () => workload.calls.some((call) => call.route === route && call.answeredAt > resetAt && call.status === 500),
        `the ${route} cut by the reset answers`,
      );

      const [failed] = workload.calls.filter(
        (call) => call.route === route && call.answeredAt > resetAt && call.status === 500,
      );
      expect(failed.body).toEqual({ error: body });
      expect(failed.answeredAt - failed.sentAt).toBeLessThan(BOUND_MS + SLACK_MS);
      expect(logs.at('warn').some((entry) => /database unavailable/.test(entry.message))).toBe(true);
      await expectLedgerAndLogs(workload, tenant, queue);
    },
  );

  it('answers pool, never internal error, while the database restarts and recovers (refused, then 57P03), and catches up after', async () => {
    const tenant = newTenant();
    const queue = 'recovering';
    await configure(tenant, queue);
    const workload = (running = workloadFor(tenant, queue));
    workload.start();
    await waitFor(() => workload.acksSucceeded >= 3, 'the workload gets going');

    // Down: every connection cut, new ones refused.
    await proxy.stop();
    const downAt = performance.now();
    await waitFor(
      () => workload.calls.filter((call) => call.sentAt > downAt && call.status === 500).length >= 3,
      'requests fail while down',
    );
    // Recovering: connections are accepted and refused with 57P03.
    await proxy.start();
    proxy.recovering();
    const recoveringAt = performance.now();
    await waitFor(
      () => workload.calls.filter((call) => call.sentAt > recoveringAt && call.status === 500).length >= 3,
      'requests fail while recovering',
    );
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(503);
    proxy.recovering(false);
    const upAt = performance.now();

    const outage = workload.callsSentBetween(downAt, upAt);
    const failures = outage.filter((call) => call.status !== undefined && call.status >= 500);
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.filter((call) => (call.body as { error?: string }).error !== 'pool')).toEqual([]);
    expect(outage.filter((call) => call.answeredAt - call.sentAt > BOUND_MS + SLACK_MS)).toEqual([]);
    expect(logs.at('warn').some((entry) => /57P03|recovery mode/.test(entry.message))).toBe(true);
    await expectLedgerAndLogs(workload, tenant, queue);
  });
});
