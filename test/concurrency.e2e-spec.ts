import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { WakeupChannel } from '../src/wakeup/wakeup-channel';
import { BrokerClient, PopBody } from './support/broker-client';
import { cursors } from './support/db-state';
import { sleep } from './support/sleep';
import { TcpProxy } from './support/tcp-proxy';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { waitFor } from './support/wait';

const randomInt = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));

/** What a crowd of consumers saw: any violation is recorded, not thrown, so every worker runs to the end. */
class Ledger {
  readonly violations: string[] = [];
  readonly holders = new Map<string, number>();
  readonly ackCounts = new Map<string, number>();
  /** Per partition, the payload numbers in the order their acks succeeded. */
  readonly ackedOrder = new Map<string, number[]>();
  redeliveries = 0;

  claim(worker: number, pop: PopBody): void {
    for (const partitionId of new Set(pop.messages.map((message) => message.partitionId))) {
      const holder = this.holders.get(partitionId);
      if (holder !== undefined)
        this.violations.push(`worker ${worker} got partition ${partitionId} held by worker ${holder}`);
      this.holders.set(partitionId, worker);
    }
  }

  /** Called before the ack is sent: while it is in flight the lease is still held, so nobody else can claim. */
  letGo(worker: number, pop: PopBody): void {
    for (const message of pop.messages) {
      if (this.holders.get(message.partitionId) === worker) this.holders.delete(message.partitionId);
    }
  }

  acked(pop: PopBody, results: Array<{ success: boolean }>): void {
    pop.messages.forEach((message, index) => {
      if (!results[index].success) return;
      this.ackCounts.set(message.transactionId, (this.ackCounts.get(message.transactionId) ?? 0) + 1);
      const order = this.ackedOrder.get(message.partitionId) ?? [];
      order.push((message.data as { n: number }).n);
      this.ackedOrder.set(message.partitionId, order);
    });
  }
}

// PGlite runs one transaction at a time: it cannot show lock contention,
// SKIP LOCKED under load, or a NOTIFY travelling between connections.
(onEmbeddedDatabase ? describe.skip : describe)('on real PostgreSQL, under concurrency', () => {
  let brokerA: NestExpressApplication;
  let brokerB: NestExpressApplication;

  beforeAll(async () => {
    [brokerA, brokerB] = await Promise.all([
      createTestApp({ DB_POOL_SIZE: '8' }),
      createTestApp({ DB_POOL_SIZE: '8' }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([brokerA.close(), brokerB.close()]);
  });

  /**
   * Workers pop (random batch and partition count), check that nobody else
   * holds what they got, extend, work a little, then ack with the lease.
   * `stall` lets one worker sleep past its lease before acking.
   */
  async function runWorkers(options: {
    tenant: string;
    brokers: NestExpressApplication[];
    workers: number;
    total: number;
    ledger: Ledger;
    stall?: {
      worker: number;
      leaseSeconds: number;
      sleepMs: number;
      onStaleAck: (results: Array<{ success: boolean; error: string | null }>) => void;
    };
  }): Promise<void> {
    const { ledger, total, stall } = options;
    const acked = () => [...ledger.ackCounts.values()].reduce((sum, count) => sum + count, 0);
    const deadline = Date.now() + 20_000;
    await Promise.all(
      Array.from({ length: options.workers }, async (_, worker) => {
        const client = new BrokerClient(options.brokers[worker % options.brokers.length], options.tenant);
        let stalled = false;
        while (acked() < total && Date.now() < deadline) {
          const stalling = stall?.worker === worker && !stalled;
          const response = await client.pop('work', {
            batch: randomInt(1, 8),
            partitions: randomInt(1, 3),
            leaseSeconds: stalling ? stall.leaseSeconds : 15,
          });
          if (response.status === 204) {
            await sleep(randomInt(5, 20));
            continue;
          }
          const pop: PopBody = response.body;
          ledger.redeliveries += pop.messages.filter((message) => message.deliveryAttempt > 1).length;
          if (stalling) {
            // The handler outlives its lease: someone else must get the batch, and this ack must be refused.
            stalled = true;
            await sleep(stall.sleepMs);
            const stale = await client.ackAll(pop);
            stall.onStaleAck(stale.body);
            ledger.acked(pop, stale.body);
            continue;
          }
          ledger.claim(worker, pop);
          let extend = await client.extend(pop.leaseId!, 15);
          // Busy: another transaction (a stale holder's refused ack) held a row for a moment; renew again.
          while (extend.headers['leasehold-lease-status'] === 'busy') extend = await client.extend(pop.leaseId!, 15);
          if (extend.body.renewed !== pop.partitionsClaimed) {
            ledger.violations.push(
              `worker ${worker} renewed ${extend.body.renewed} of ${pop.partitionsClaimed} partitions`,
            );
          }
          await sleep(randomInt(0, 5));
          ledger.letGo(worker, pop);
          const ack = await client.ackAll(pop);
          if (ack.status !== 200) ledger.violations.push(`ack answered ${ack.status}`);
          else ledger.acked(pop, ack.body);
        }
      }),
    );
  }

  async function seed(tenant: string, partitions: number, perPartition: number): Promise<string[]> {
    const client = new BrokerClient(brokerA, tenant);
    const ids: string[] = [];
    for (let p = 0; p < partitions; p++) ids.push(...(await client.pushMany('work', perPartition, `p${p}`)));
    return ids;
  }

  function expectExactlyOnce(ledger: Ledger, pushed: string[]): void {
    expect(ledger.violations).toEqual([]);
    expect([...ledger.ackCounts.keys()].sort()).toEqual([...pushed].sort());
    expect([...ledger.ackCounts.values()].every((count) => count === 1)).toBe(true);
    for (const order of ledger.ackedOrder.values()) {
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
  }

  it.each([
    ['one broker', 1],
    ['two brokers on one database', 2],
  ])(
    'with %s, consumers of one group never hold a partition at once and every message is acked exactly once, in order',
    async (_case, brokerCount) => {
      const tenant = newTenant();
      const pushed = await seed(tenant, 12, 20);
      const ledger = new Ledger();

      await runWorkers({
        tenant,
        brokers: [brokerA, brokerB].slice(0, brokerCount),
        workers: 8,
        total: pushed.length,
        ledger,
      });

      expectExactlyOnce(ledger, pushed);
      const rows = await cursors(brokerA.get(Database), tenant, 'work');
      expect(rows).toHaveLength(12);
      expect(rows.every((row) => row.committedOffset === 20 && row.leaseId === null)).toBe(true);
    },
  );

  it('redelivers a batch whose lease expired mid-handler to another consumer and refuses the stale holder its leased ack', async () => {
    const tenant = newTenant();
    const pushed = await seed(tenant, 4, 10);
    const ledger = new Ledger();
    let staleResults: Array<{ success: boolean; error: string | null }> = [];

    await runWorkers({
      tenant,
      brokers: [brokerA, brokerB],
      workers: 4,
      total: pushed.length,
      ledger,
      stall: { worker: 0, leaseSeconds: 1, sleepMs: 1_500, onStaleAck: (results) => (staleResults = results) },
    });

    expect(staleResults.length).toBeGreaterThan(0);
    expect(staleResults.every((result) => !result.success && result.error === 'invalid or expired lease')).toBe(true);
    expect(ledger.redeliveries).toBeGreaterThanOrEqual(staleResults.length);
    expectExactlyOnce(ledger, pushed);
  });

  it('keeps offsets gapless and ordered when both brokers push to one partition at once', async () => {
    const tenant = newTenant();
    const clients = [new BrokerClient(brokerA, tenant), new BrokerClient(brokerB, tenant)];

    await Promise.all(
      Array.from({ length: 20 }, (_, n) =>
        clients[n % 2].push([
          { queue: 'log', payload: n },
          { queue: 'log', payload: n },
        ]),
      ),
    );

    const offsets: Array<{ seq: number }> = await brokerA
      .get(Database)
      .query('SELECT seq::int AS seq FROM messages WHERE tenant_id = $1 ORDER BY seq', [tenant]);
    expect(offsets.map((row) => row.seq)).toEqual(Array.from({ length: 40 }, (_, n) => n + 1));
  });

  it('wakes a long poll parked on one broker when a push arrives through the other (LISTEN/NOTIFY)', async () => {
    const tenant = newTenant();
    const consumer = new BrokerClient(brokerB, tenant);
    const producer = new BrokerClient(brokerA, tenant);
    await consumer.configure({ queue: 'events' });
    const started = Date.now();

    const parked = consumer.pop('events', { wait: true, timeout: 10_000 }).then((response) => response);
    await sleep(300);
    await producer.pushMany('events', 1, undefined, 'remote');
    const response = await parked;

    expect(response.status).toBe(200);
    expect(response.body.messages[0].transactionId).toBe('remote-0');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  describe('when the LISTEN connection drops', () => {
    let proxy: TcpProxy;
    let proxied: NestExpressApplication;

    beforeAll(async () => {
      proxy = TcpProxy.forDatabaseUrl(process.env.DATABASE_URL!);
      await proxy.start();
      proxied = await createTestApp({
        DATABASE_URL: proxy.rewrite(process.env.DATABASE_URL!),
        DB_ACQUIRE_TIMEOUT_MS: '500',
      });
    });

    afterAll(async () => {
      await proxied.close();
      await proxy.stop();
    });

    it('reconnects and hears pushes from other brokers again', async () => {
      const wakeup = proxied.get(WakeupChannel);
      const tenant = newTenant();
      const consumer = new BrokerClient(proxied, tenant);
      const producer = new BrokerClient(brokerA, tenant);
      await producer.configure({ queue: 'events' });
      expect(wakeup.listening).toBe(true);

      await proxy.stop();
      await waitFor(() => !wakeup.listening, 'the listener loses its connection', 5_000);
      await proxy.start();
      await waitFor(() => wakeup.listening, 'the listener reconnects', 10_000);

      const parked = consumer.pop('events', { wait: true, timeout: 10_000 }).then((response) => response);
      await sleep(300);
      const started = Date.now();
      await producer.pushMany('events', 1, undefined, 'after-reconnect');
      const response = await parked;

      expect(response.status).toBe(200);
      expect(response.body.messages[0].transactionId).toBe('after-reconnect-0');
      expect(Date.now() - started).toBeLessThan(3_000);
    });
  });
});
