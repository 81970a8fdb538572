import { randomInt } from 'node:crypto';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client, Pool } from 'pg';
import { Database } from '../src/database/database';
import { DatabaseTimeoutError } from '../src/common/database-errors';
import { TransactionRunner } from '../src/database/transaction-runner';
import { backendPidOf, openSession } from './support/pg-session';
import { createTestApp, onEmbeddedDatabase } from './support/test-app';
import { sessionExists, waitFor } from './support/wait';

// Sessions, pids and advisory locks of other sessions: real PostgreSQL only.
(onEmbeddedDatabase ? describe.skip : describe)('connection hygiene on real PostgreSQL', () => {
  let app: NestExpressApplication;
  let observer: Client;
  let pool: Pool;

  beforeAll(async () => {
    // One connection: anything reused would be the same session.
    app = await createTestApp({ DB_POOL_SIZE: '1', DB_STATEMENT_TIMEOUT_MS: '500' });
    pool = app.get(Database).pool;
    observer = await openSession();
  });

  afterAll(async () => {
    await observer.end();
    await app.close();
  });

  /** Whether another session can take the lock: false while a transaction holding it is open. */
  const lockIsFree = async (key: number): Promise<boolean> =>
    (await observer.query('SELECT pg_try_advisory_xact_lock($1) AS free', [key])).rows[0].free as boolean;

  it('reuses a connection released idle', async () => {
    const first = await pool.connect();
    const pid = await backendPidOf(first);
    first.release();

    const second = await pool.connect();
    expect(await backendPidOf(second)).toBe(pid);
    second.release();
  });

  it('closes, instead of reusing, a connection released inside a transaction; the server rolls the transaction back', async () => {
    const key = randomInt(1, 2 ** 31);
    const abandoned = await pool.connect();
    const pid = await backendPidOf(abandoned);
    await abandoned.query('BEGIN');
    await abandoned.query('SELECT pg_advisory_xact_lock($1)', [key]);
    abandoned.release();

    const next = await pool.connect();
    expect(await backendPidOf(next)).not.toBe(pid);
    expect(next.getTransactionStatus()).toBe('I');
    next.release();
    await waitFor(async () => !(await sessionExists(observer, pid)), 'the abandoned session ends');
    expect(await lockIsFree(key)).toBe(true);
  });

  it('closes a connection whose statement outlived the client-side timeout; the next request gets a fresh session', async () => {
    const timedOut = await pool.connect();
    const pid = await backendPidOf(timedOut);
    await expect(timedOut.query({ text: 'SELECT pg_sleep(30)', query_timeout: 100 } as never)).rejects.toThrow(
      'Query read timeout',
    );
    timedOut.release();

    const next = await pool.connect();
    expect(await backendPidOf(next)).not.toBe(pid);
    expect((await next.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    next.release();
    await waitFor(async () => !(await sessionExists(observer, pid)), 'the timed-out session ends');
  });

  it('fails a unit of work that outruns its budget with DatabaseTimeoutError, closes its connection and leaves nothing of it', async () => {
    const key = randomInt(1, 2 ** 31);
    const runner = app.get(TransactionRunner);
    let pid = 0;
    const started = Date.now();
    // Each statement stays under the server's statement_timeout (500 ms); together they pass the 1.5 s budget.
    const outcome = runner.run(undefined, async (manager) => {
      pid = (await manager.query('SELECT pg_backend_pid() AS pid'))[0].pid;
      await manager.query('SELECT pg_advisory_xact_lock($1)', [key]);
      for (let step = 0; step < 10; step += 1) await manager.query('SELECT pg_sleep(0.4)');
    });

    await expect(outcome).rejects.toBeInstanceOf(DatabaseTimeoutError);
    expect(Date.now() - started).toBeLessThan(1_500 + 2_000);
    await waitFor(async () => !(await sessionExists(observer, pid)), 'the session of the unit ends');
    expect(await lockIsFree(key)).toBe(true);
    await expect(runner.run(undefined, (manager) => manager.query('SELECT 1 AS one'))).resolves.toEqual([{ one: 1 }]);
  });

  it('rolls back a unit of work whose statement the server refused, and keeps the connection', async () => {
    const runner = app.get(TransactionRunner);
    let pid = 0;
    await expect(
      runner.run(undefined, async (manager) => {
        pid = (await manager.query('SELECT pg_backend_pid() AS pid'))[0].pid;
        await manager.query('SELECT 1/0');
      }),
    ).rejects.toThrow('division by zero');

    const [row] = await runner.run(undefined, (manager) => manager.query('SELECT pg_backend_pid() AS pid'));
    expect(row.pid).toBe(pid);
  });
});
