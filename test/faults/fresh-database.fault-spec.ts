import { Client } from 'pg';
import { onEmbeddedDatabase } from '../support/test-app';
import { BrokerProcess } from './support/broker-process';

jest.setTimeout(400_000);

/**
 * Brokers started together on an empty database, as a deployment's replicas start: one migrates while the others
 * wait for it. A waiter once held a snapshot the migrating broker's CREATE INDEX CONCURRENTLY waited for, and the
 * index build hit the statement timeout: no broker started.
 */
(onEmbeddedDatabase ? describe.skip : describe)('brokers started together on an empty database', () => {
  const database = `leasehold_fresh_${process.pid}_${Date.now()}`;
  const serverUrl = new URL(process.env.DATABASE_URL!);
  const admin = (): Client =>
    new Client({ connectionString: Object.assign(new URL(serverUrl), { pathname: '/postgres' }).href });
  const brokers: BrokerProcess[] = [];

  beforeAll(async () => {
    const client = admin();
    await client.connect();
    await client.query(`CREATE DATABASE ${database}`);
    await client.end();
  });

  afterAll(async () => {
    await Promise.all(brokers.map((broker) => broker.stop()));
    const client = admin();
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await client.end();
  });

  it('all start: one migrates, the others wait for it, and every index is built', async () => {
    const url = Object.assign(new URL(serverUrl), { pathname: `/${database}` }).href;
    const started = await Promise.allSettled(
      [1, 2, 3].map(() => BrokerProcess.start({ DATABASE_URL: url, DB_STATEMENT_TIMEOUT_MS: '1000' })),
    );
    for (const result of started) if (result.status === 'fulfilled') brokers.push(result.value);
    expect(started.map((result) => (result.status === 'rejected' ? String(result.reason) : 'started'))).toEqual([
      'started',
      'started',
      'started',
    ]);
    const client = new Client({ connectionString: url });
    await client.connect();
    const { rows } = await client.query<{ invalid: number }>(
      `SELECT count(*)::int AS invalid FROM pg_index WHERE NOT indisvalid`,
    );
    await client.end();
    expect(rows[0].invalid).toBe(0);
  });
});
