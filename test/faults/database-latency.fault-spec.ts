import { NestExpressApplication } from '@nestjs/platform-express';
import { BrokerClient } from '../support/broker-client';
import { sleep } from '../support/sleep';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';
import { Client } from 'pg';
import { connectSession } from '../../src/database/session-settings';

(onEmbeddedDatabase ? describe.skip : describe)('a slow database (added latency) on real PostgreSQL', () => {
  const databaseUrl = process.env.DATABASE_URL!;
  let proxy: TcpProxy;
  let app: NestExpressApplication;

  beforeAll(async () => {
    proxy = TcpProxy.forDatabaseUrl(databaseUrl);
    await proxy.start();
    app = await createTestApp({ DATABASE_URL: proxy.rewrite(databaseUrl), DB_POOL_SIZE: '2' });
  });

  afterAll(async () => {
    proxy.delay(0);
    await app.close();
    await proxy.stop();
  });

  it('does not hand out a lease that ran out before the pop could answer: 500 database timeout, and the batch redelivers right after', async () => {
    const client = new BrokerClient(app, newTenant());
    await client.configure({ queue: 'slow' });
    // The group's first pop creates it, in round trips of its own.
    expect((await client.pop('slow')).status).toBe(204);
    await client.pushMany('slow', 2);
    // About 1.2 s a round trip: the claim's own, which commits it, takes longer than a 1 s lease.
    proxy.delay(600);
    const started = Date.now();
    const late = await client.pop('slow', { leaseSeconds: 1, batch: 10 });
    const tookMs = Date.now() - started;
    proxy.delay(0);

    expect(tookMs).toBeGreaterThan(1_000);
    expect(late.status).toBe(500);
    expect(late.body).toEqual({ error: 'database timeout' });

    // The refused lease ends at most a round trip after the answer.
    let next = await client.pop('slow', { leaseSeconds: 30, batch: 10 });
    const retryUntil = Date.now() + 10_000;
    while (next.status === 204 && Date.now() < retryUntil) {
      await sleep(50);
      next = await client.pop('slow', { leaseSeconds: 30, batch: 10 });
    }
    expect(next.status).toBe(200);
    expect(next.body.messages.map((message: { deliveryAttempt: number }) => message.deliveryAttempt)).toEqual([2, 2]);
    expect(next.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
      'slow-Default-0',
      'slow-Default-1',
    ]);
    const extended = await client.extend(next.body.leaseId, 30);
    expect(extended.body).toMatchObject({ success: true, renewed: 1 });
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('a database slower to connect to than DB_ACQUIRE_TIMEOUT_MS', () => {
  const databaseUrl = process.env.DATABASE_URL!;
  const ACQUIRE_MS = 500;
  let proxy: TcpProxy;
  let app: NestExpressApplication;

  beforeAll(async () => {
    proxy = TcpProxy.forDatabaseUrl(databaseUrl);
    await proxy.start();
    app = await createTestApp({
      DATABASE_URL: proxy.rewrite(databaseUrl),
      DB_POOL_SIZE: '2',
      DB_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_MS),
    });
  });

  afterAll(async () => {
    proxy.delay(0);
    await app.close();
    await proxy.stop();
  });

  it('keeps opening the connection after a request stops waiting for it, and serves the next requests on it', async () => {
    const client = new BrokerClient(app, newTenant());
    await client.configure({ queue: 'far' });
    // Every pooled connection cut; each new one now takes four delayed trips (startup, session settings).
    await proxy.stop();
    await proxy.start();
    proxy.delay(250);
    const direct = new Client({ connectionString: proxy.rewrite(databaseUrl) });
    const started = Date.now();
    await connectSession(direct);
    const connectMs = Date.now() - started;
    await direct.end();
    expect(connectMs).toBeGreaterThan(ACQUIRE_MS);

    // A request still waits no longer than DB_ACQUIRE_TIMEOUT_MS for a connection; the one it waited for opens anyway.
    const statuses: number[] = [];
    const until = Date.now() + 30_000;
    const item = { queue: 'far', payload: { n: 1 }, transactionId: 'far-1' };
    let pushed = await client.push([item]);
    statuses.push(pushed.status);
    while (pushed.status !== 201 && Date.now() < until) {
      expect(pushed.body).toEqual({ error: 'pool' });
      pushed = await client.push([item]);
      statuses.push(pushed.status);
    }
    expect(statuses.at(-1)).toBe(201);
    proxy.delay(0);
    const popped = await client.popLeased('far');
    expect(popped.messages.map((message: { data: unknown }) => message.data)).toEqual([{ n: 1 }]);
  });
});
