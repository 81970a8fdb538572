import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { MetricsService } from '../../src/metrics/metrics.service';
import { BrokerClient } from '../support/broker-client';
import { backendPidOf, openSession } from '../support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { waitFor, waitForLockWaiter } from '../support/wait';

jest.setTimeout(120_000);

/** The push's lock on its partitions, in primary-key order. */
const PUSH_LOCK = 'AS t(queue_name, name)';

async function retries(app: NestExpressApplication, sqlstate: string): Promise<number> {
  const counter = app.get(MetricsService).registry.getSingleMetric('leasehold_database_retries_total');
  const values = counter ? (await counter.get()).values : [];
  return values.find((value) => value.labels.sqlstate === sqlstate)?.value ?? 0;
}

async function waitingForLock(observer: Client, pid: number): Promise<boolean> {
  await observer.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await observer.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
    [pid],
  );
  return rows[0].n > 0;
}

/** What the tenant has stored: each transactionId with its offset, and each partition's last offset. */
async function ledger(
  session: Client,
  tenant: string,
): Promise<{ messages: Array<{ transaction_id: string; seq: number }>; offsets: Record<string, number> }> {
  const messages = await session.query<{ transaction_id: string; seq: number }>(
    'SELECT transaction_id, seq::int AS seq FROM messages WHERE tenant_id = $1 ORDER BY transaction_id',
    [tenant],
  );
  const partitions = await session.query<{ name: string; last_offset: number }>(
    'SELECT name, last_offset::int AS last_offset FROM partitions WHERE tenant_id = $1',
    [tenant],
  );
  return {
    messages: messages.rows,
    offsets: Object.fromEntries(partitions.rows.map((row) => [row.name, row.last_offset])),
  };
}

/**
 * A unit of work that PostgreSQL rolls back as a deadlock (40P01) or a serialization failure (40001) is run again
 * whole, and its request succeeds: nothing stored twice, nothing lost. Both are made for real, with sessions of the
 * test's own holding rows the broker's statement needs.
 */
(onEmbeddedDatabase ? describe.skip : describe)('deadlocks and serialization failures', () => {
  const sessions: Client[] = [];
  const session = async (): Promise<Client> => {
    const opened = await openSession();
    sessions.push(opened);
    return opened;
  };

  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((opened) => opened.end()));
  });

  it('a push that PostgreSQL chose as a deadlock victim is run again and answers 201, each message stored once', async () => {
    const app = await createTestApp();
    try {
      const client = new BrokerClient(app, newTenant());
      const [holder, blocker, observer] = [await session(), await session(), await session()];
      // Two partitions, a before b in the order the push locks them (UUIDv7 ids follow creation).
      await client.push([{ queue: 'crossed', partition: 'a', payload: {}, transactionId: 'first-a' }]).expect(201);
      await client.push([{ queue: 'crossed', partition: 'b', payload: {}, transactionId: 'first-b' }]).expect(201);
      const { rows } = await observer.query<{ id: string; name: string }>(
        'SELECT id, name FROM partitions WHERE tenant_id = $1 ORDER BY id',
        [client.tenant],
      );
      expect(rows.map((row) => row.name)).toEqual(['a', 'b']);
      const [a, b] = rows.map((row) => row.id);

      // The holder keeps the push waiting for a; the blocker holds b and then asks for a behind the push. Only the
      // push's session looks for deadlocks in time: it is the one that closes the cycle, and the victim.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM partitions WHERE id = $1 FOR UPDATE', [a]);
      await blocker.query("SET deadlock_timeout = '10min'");
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM partitions WHERE id = $1 FOR UPDATE', [b]);
      const before = await retries(app, '40P01');
      const pushed = client.push([
        { queue: 'crossed', partition: 'a', payload: { n: 2 }, transactionId: 'second-a' },
        { queue: 'crossed', partition: 'b', payload: { n: 2 }, transactionId: 'second-b' },
      ]);
      const answer = pushed.then((response) => response);
      await waitForLockWaiter(observer, PUSH_LOCK);
      const blockerPid = await backendPidOf(blocker);
      const blockerHasA = blocker.query('SELECT 1 FROM partitions WHERE id = $1 FOR UPDATE', [a]);
      await waitFor(() => waitingForLock(observer, blockerPid), 'the blocker waiting for a behind the push');
      // The push takes a, then waits for b: the cycle is closed, and PostgreSQL ends the push's transaction, which
      // gives a to the blocker.
      await holder.query('ROLLBACK');
      await blockerHasA;
      await blocker.query('ROLLBACK');

      const response = await answer;
      expect(response.status).toBe(201);
      expect((response.body as Array<{ status: string }>).map((item) => item.status)).toEqual(['queued', 'queued']);
      expect(await ledger(observer, client.tenant)).toEqual({
        messages: [
          { transaction_id: 'first-a', seq: 1 },
          { transaction_id: 'first-b', seq: 1 },
          { transaction_id: 'second-a', seq: 2 },
          { transaction_id: 'second-b', seq: 2 },
        ],
        offsets: { a: 2, b: 2 },
      });
      expect(await retries(app, '40P01')).toBe(before + 1);
    } finally {
      await app.close();
    }
  });

  it('a push refused as a serialization failure (transactions made serializable by the database) is run again', async () => {
    // The broker's transactions are READ COMMITTED unless the server says otherwise: here it does.
    const url = new URL(process.env.DATABASE_URL!);
    url.searchParams.set('options', '-c default_transaction_isolation=serializable');
    const app = await createTestApp({ DATABASE_URL: url.toString() });
    try {
      const client = new BrokerClient(app, newTenant());
      const [blocker, observer] = [await session(), await session()];
      await client.push([{ queue: 'serial', partition: 'p', payload: {}, transactionId: 'first' }]).expect(201);
      const before = await retries(app, '40001');

      // The push's snapshot is taken while it waits for the row; the row then changes under it.
      await blocker.query('BEGIN');
      await blocker.query('UPDATE partitions SET last_pushed_at = last_pushed_at WHERE tenant_id = $1', [
        client.tenant,
      ]);
      const answer = client
        .push([{ queue: 'serial', partition: 'p', payload: {}, transactionId: 'second' }])
        .then((response) => response);
      await waitForLockWaiter(observer, PUSH_LOCK);
      await blocker.query('COMMIT');

      const response = await answer;
      expect({ status: response.status, body: response.body as unknown }).toEqual({
        status: 201,
        body: [expect.objectContaining({ transaction_id: 'second', status: 'queued' })],
      });
      expect(await retries(app, '40001')).toBe(before + 1);
      expect(await ledger(observer, client.tenant)).toEqual({
        messages: [
          { transaction_id: 'first', seq: 1 },
          { transaction_id: 'second', seq: 2 },
        ],
        offsets: { p: 2 },
      });
    } finally {
      await app.close();
    }
  });
});
