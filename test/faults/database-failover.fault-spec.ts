import { randomUUID } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { loadConfig } from '../../src/config/load-config';
import { migrateDatabase } from '../../src/database/run-migrations';
import { BrokerClient } from '../support/broker-client';
import { openSession } from '../support/pg-session';
import { sleep } from '../support/sleep';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { waitFor } from '../support/wait';
import { CapturedLogs } from './support/captured-logs';
import { consumedAll, orphanedTransactions } from './support/ledger';
import { Workload } from './support/workload';

jest.setTimeout(120_000);

const SUCCESS = [200, 201, 204];

/** Ends every session of the broker (`pg_terminate_backend`), as a failover or a fast restart of the server does. */
async function terminateSessions(db: Client, applicationName: string, database?: string): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity
      WHERE application_name = $1 AND datname = COALESCE($2, current_database()) AND pid <> pg_backend_pid()`,
    [applicationName, database ?? null],
  );
  return rows[0].ended;
}

(onEmbeddedDatabase ? describe.skip : describe)('sessions terminated by a failover, on real PostgreSQL', () => {
  const databaseUrl = process.env.DATABASE_URL!;
  /** Tells this file's broker sessions apart from those of tests running beside it. */
  const applicationName = `leasehold-${randomUUID().slice(0, 8)}`;
  let app: NestExpressApplication | undefined;
  let running: Workload | undefined;
  let logs: CapturedLogs;
  let db: Client;

  async function start(url: string): Promise<NestExpressApplication> {
    logs = new CapturedLogs();
    app = await createTestApp(
      {
        DATABASE_URL: `${url}?application_name=${applicationName}`,
        DB_POOL_SIZE: '4',
        DB_STATEMENT_TIMEOUT_MS: '1000',
        DB_ACQUIRE_TIMEOUT_MS: '1000',
      },
      {},
      (created) => created.useLogger(logs),
    );
    await app.listen(0, '127.0.0.1');
    return app;
  }

  beforeEach(async () => {
    db = await openSession(databaseUrl);
  });

  afterEach(async () => {
    await running?.stop();
    running = undefined;
    await app?.close();
    app = undefined;
    await db.end();
  });

  it('answers pushes, pops and acks in flight success or 500 pool, never internal error, and loses nothing', async () => {
    const broker = await start(databaseUrl);
    const tenant = newTenant();
    const queue = 'failover';
    const base = `http://127.0.0.1:${(broker.getHttpServer().address() as AddressInfo).port}`;
    await new BrokerClient(broker, tenant).configure({ queue, options: { retryLimit: 1000 } }).expect(200);
    const workload = (running = new Workload({
      brokers: [base],
      tenantHeader: TENANT_HEADER,
      tenant,
      queue,
      partitions: 4,
      messagesPerPartition: 30,
      consumers: 3,
      leaseSeconds: 3,
      pushIntervalMs: 20,
      nackEvery: 6,
    }));
    workload.start();
    await waitFor(() => workload.acksSucceeded >= 3, 'the workload gets going');

    // Sessions caught between two statements of a transaction are the ones TypeORM's runner only
    // hears about as an 'error' event; now and then every session, whatever it is doing.
    let ended = 0;
    for (let round = 0; round < 150 && workload.pushesAccepted < 100; round += 1) {
      const { rows } = await db.query(
        `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity
          WHERE application_name = $1 AND datname = current_database()
            AND (state LIKE 'idle in transaction%' OR $2)`,
        [applicationName, round % 10 === 0],
      );
      ended += rows[0].ended;
      await sleep(20);
    }
    expect(ended).toBeGreaterThan(0);

    await workload.producersFinished();
    await waitFor(() => consumedAll(db, tenant, queue), 'every message consumed', 60_000);
    await workload.stop();
    const unexpected = workload.calls.filter(
      (call) => !SUCCESS.includes(call.status ?? 0) && !(call.status === 500 && isPool(call.body)),
    );
    expect(unexpected).toEqual([]);
    expect(workload.calls.some((call) => call.status === 500)).toBe(true);
    expect(await workload.ledger.problems(db, tenant, queue)).toEqual([]);
    expect(await orphanedTransactions(db, applicationName)).toBe(0);
    expect(logs.at('error')).toEqual([]);
  });

  describe('a server that turned read-only (a demoted primary)', () => {
    const scratch = `${new URL(databaseUrl).pathname.slice(1)}_ro_${randomUUID().slice(0, 8)}`;
    const scratchUrl = Object.assign(new URL(databaseUrl), { pathname: `/${scratch}` }).toString();

    beforeAll(async () => {
      const admin = await openSession(databaseUrl);
      await admin.query(`CREATE DATABASE "${scratch}"`);
      await admin.end();
      const config = loadConfig({ ...process.env, DATABASE_URL: scratchUrl });
      await migrateDatabase(config.database, scratchUrl);
    });

    afterAll(async () => {
      const admin = await openSession(databaseUrl);
      await admin.query(`DROP DATABASE IF EXISTS "${scratch}" WITH (FORCE)`);
      await admin.end();
    });

    it('answers writes 500 pool (25006), drops those connections, and recovers without a restart once writable', async () => {
      const broker = await start(scratchUrl);
      const client = new BrokerClient(broker, newTenant());
      await client.pushMany('demoted', 3);
      const leased = await client.popLeased('demoted', { batch: 3, leaseSeconds: 60 });

      await db.query(`ALTER DATABASE "${scratch}" SET default_transaction_read_only = on`);
      await terminateSessions(db, applicationName, scratch);
      for (let n = 0; n < 6; n += 1) {
        const refused = await client.push([{ queue: 'demoted', payload: { n }, transactionId: `refused-${n}` }]);
        expect([refused.status, refused.body]).toEqual([500, { error: 'pool' }]);
      }
      const ack = await client.ackAll(leased);
      expect([ack.status, ack.body]).toEqual([500, { error: 'pool' }]);

      // Writable again: sessions already open keep their read-only default, so only new connections help.
      await db.query(`ALTER DATABASE "${scratch}" RESET default_transaction_read_only`);
      // Each connection that was refused is closed on release, so a pool of 4 is renewed within a few requests.
      const statuses: number[] = [];
      for (let attempt = 0; attempt < 8 && statuses.at(-1) !== 201; attempt += 1) {
        const push = await client.push([{ queue: 'demoted', payload: { n: 3 }, transactionId: 'demoted-Default-3' }]);
        statuses.push(push.status);
      }
      expect(statuses.at(-1)).toBe(201);
      const acked = await client.ackAll(leased);
      expect([acked.status, acked.body.map((result: { success: boolean }) => result.success)]).toEqual([
        200,
        [true, true, true],
      ]);
      const rest = await client.popLeased('demoted', { batch: 10 });
      expect(rest.messages.map((message) => message.transactionId)).toEqual(['demoted-Default-3']);
      expect(logs.at('error')).toEqual([]);
      expect(logs.at('warn').some((entry) => /read-only/.test(entry.message))).toBe(true);
    });
  });
});

function isPool(body: unknown): boolean {
  return (body as { error?: string } | undefined)?.error === 'pool';
}
