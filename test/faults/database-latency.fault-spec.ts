import { NestExpressApplication } from '@nestjs/platform-express';
import { BrokerClient } from '../support/broker-client';
import { sleep } from '../support/sleep';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';

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
