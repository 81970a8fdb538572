import { NestExpressApplication } from '@nestjs/platform-express';
import { BrokerClient, PopBody } from '../support/broker-client';
import { sleep } from '../support/sleep';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { TcpProxy } from '../support/tcp-proxy';
import { within } from '../support/wait';
import { CapturedLogs } from './support/captured-logs';

/** Far sooner than the lease would have ended: only a release makes the batch claimable this early. */
const PROMPTLY_MS = 4_000;

(onEmbeddedDatabase ? describe.skip : describe)('a pop that gave up after claiming, on real PostgreSQL', () => {
  const databaseUrl = process.env.DATABASE_URL!;
  let proxy: TcpProxy;
  let app: NestExpressApplication | undefined;
  let logs: CapturedLogs;

  async function start(statementTimeoutMs: number): Promise<BrokerClient> {
    proxy = TcpProxy.forDatabaseUrl(databaseUrl);
    await proxy.start();
    logs = new CapturedLogs();
    app = await createTestApp(
      {
        DATABASE_URL: proxy.rewrite(databaseUrl),
        DB_STATEMENT_TIMEOUT_MS: String(statementTimeoutMs),
        DB_ACQUIRE_TIMEOUT_MS: '5000',
      },
      {},
      (created) => created.useLogger(logs),
    );
    return new BrokerClient(app, newTenant());
  }

  afterEach(async () => {
    proxy.delay(0);
    proxy.heal();
    await app?.close();
    app = undefined;
    await proxy.stop();
  });

  /** A long poll of another consumer, begun once the first pop answered: the batch, and how long after it came. */
  async function redelivered(client: BrokerClient, after: number): Promise<{ body: PopBody; afterMs: number }> {
    const next = await client.pop('gave-up', { wait: true, timeout: 15_000, batch: 10, leaseSeconds: 60 });
    expect(next.status).toBe(200);
    return { body: next.body as PopBody, afterMs: Date.now() - after };
  }

  it('releases a lease that took as long as the lease to claim (500 database timeout): another pop gets the batch at once', async () => {
    const leaseSeconds = 8;
    // The whole transaction may take longer than the stall below, so the claim commits.
    const client = await start(12_000);
    await client.pushMany('gave-up', 2);
    const caught = proxy.stallWhen('leasehold_claim');
    // supertest sends on then().
    const pop = client.pop('gave-up', { batch: 10, leaseSeconds }).then((response) => response);
    // The claim reaches the server a little after a lease's length: the lease it grants is whole, but
    // the pop cannot know that and does not hand it out.
    await within(caught, 'the claim is caught');
    await sleep(leaseSeconds * 1000 + 500);
    proxy.heal();
    const late = await pop;
    const answeredAt = Date.now();
    expect([late.status, late.body]).toEqual([500, { error: 'database timeout' }]);

    const { body, afterMs } = await redelivered(client, answeredAt);
    expect(afterMs).toBeLessThan(PROMPTLY_MS);
    expect(body.messages.map((message) => [message.transactionId, message.deliveryAttempt])).toEqual([
      ['gave-up-Default-0', 2],
      ['gave-up-Default-1', 2],
    ]);
    expect(logs.at('error')).toEqual([]);
  });

  it('releases a lease whose claim committed but answered after the pop gave up (500 database timeout): another pop gets the batch at once', async () => {
    // A unit of work may take 12 s. The claim goes out with its COMMIT; held 6 s, it then commits at once, but its
    // answer is 8 s on the way: the pop gives up at 12 s on a claim that did commit, under a 60 s lease no one was
    // told of. The release it sends then is 8 s on the way too. Seconds of slack either side for a loaded machine.
    const client = await start(11_000);
    await client.pushMany('gave-up', 2);
    const caught = proxy.stallWhen('leasehold_claim');
    const pop = client.pop('gave-up', { batch: 10, leaseSeconds: 60 }).then((response) => response);
    await within(caught, 'the claim is caught');
    await sleep(6_000);
    proxy.delay(8_000);
    proxy.heal();
    const timedOut = await pop;
    const answeredAt = Date.now();
    proxy.delay(0);
    expect([timedOut.status, timedOut.body]).toEqual([500, { error: 'database timeout' }]);

    const { body, afterMs } = await redelivered(client, answeredAt);
    expect(afterMs).toBeLessThan(PROMPTLY_MS * 3);
    expect(body.messages.map((message) => [message.transactionId, message.deliveryAttempt])).toEqual([
      ['gave-up-Default-0', 2],
      ['gave-up-Default-1', 2],
    ]);
    expect(logs.at('warn').some((entry) => /gave up was released/.test(entry.message))).toBe(true);
    expect(logs.at('error')).toEqual([]);
  });

  it('answers at once when the release cannot reach the database either: the lease then expires at its time', async () => {
    const leaseSeconds = 3;
    const client = await start(5_000);
    await client.pushMany('gave-up', 2);
    const caught = proxy.stallWhen('leasehold_claim');
    const pop = client.pop('gave-up', { batch: 10, leaseSeconds }).then((response) => response);
    await within(caught, 'the claim is caught');
    await sleep(leaseSeconds * 1000 + 500);
    const releaseCaught = proxy.stallWhen('WITH release_locked');
    proxy.heal();
    const late = await pop;
    expect([late.status, late.body]).toEqual([500, { error: 'database timeout' }]);
    expect(logs.at('warn').some((entry) => /could not be released/.test(entry.message))).toBe(false);
    await within(releaseCaught, 'the release is caught');

    // The release gives up within its unit of work's 6 s; the pop did not wait for it.
    await within(
      (async () => {
        while (!logs.at('warn').some((entry) => /could not be released/.test(entry.message))) await sleep(50);
      })(),
      'the release gives up',
    );
    proxy.heal();
    const { body } = await redelivered(client, Date.now());
    expect(body.messages.map((message) => message.deliveryAttempt)).toEqual([2, 2]);
    expect(logs.at('error')).toEqual([]);
  });
});
