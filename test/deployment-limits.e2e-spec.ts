import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { BrokerRegistry, LIVE_FOR_HEARTBEATS } from '../src/cluster/broker-registry';
import { BrokersRepository } from '../src/cluster/brokers.repository';
import { nothing, sql, statement } from '../src/database/statement';
import { BrokerClient } from './support/broker-client';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { waitFor } from './support/wait';

type Answer = request.Response;

const HEARTBEAT_MS = 200;
const env = {
  BROKER_HEARTBEAT_MS: String(HEARTBEAT_MS),
  RATE_LIMIT_MANAGE: '10',
  POP_MAX_WAITING_PER_TENANT: '4',
  // The burst counts rate refusals alone: none of its listings is refused for running alongside the others.
  TENANT_MAX_HEAVY_READS: '1000',
};

const statuses = (answers: Answer[], status: number): number => answers.filter((a) => a.status === status).length;

/** `count` requests to a manage route, sent together, alternating between the brokers. */
function burst(clients: BrokerClient[], count: number): Promise<Answer[]> {
  return Promise.all(
    Array.from({ length: count }, (_, n) =>
      clients[n % clients.length].get('/api/v1/resources/queues').then((answer) => answer),
    ),
  );
}

// Two brokers registered in one database: real PostgreSQL only (the embedded one serves one process).
(onEmbeddedDatabase ? describe.skip : describe)('per-tenant limits hold for the whole deployment', () => {
  let first: NestExpressApplication;
  let second: NestExpressApplication;
  let secondClosed = false;

  beforeAll(async () => {
    first = await createTestApp(env);
    second = await createTestApp(env);
    await waitFor(
      () => first.get(BrokerRegistry).liveBrokers === 2 && second.get(BrokerRegistry).liveBrokers === 2,
      'each broker counts the other',
    );
  });

  afterAll(async () => {
    if (!secondClosed) await second.close();
    await first.close();
  });

  it('reports the count of live brokers in leasehold_brokers_live', async () => {
    for (const app of [first, second]) {
      const scraped = await request(app.getHttpServer()).get('/metrics').expect(200);
      expect(scraped.text).toMatch(/^leasehold_brokers_live 2$/m);
    }
  });

  it("lets a tenant's requests spread over two brokers through RATE_LIMIT_MANAGE times in a second, not twice that; the rest answer 429", async () => {
    const tenant = newTenant();
    const clients = [new BrokerClient(first, tenant), new BrokerClient(second, tenant)];

    const answers = await burst(clients, 20);

    // Each broker lets its share (5) through in the window; a window that ends mid-burst may add a few.
    expect(statuses(answers, 200)).toBeGreaterThanOrEqual(10);
    expect(statuses(answers, 200)).toBeLessThanOrEqual(14);
    expect(statuses(answers, 429) + statuses(answers, 200)).toBe(20);
  });

  it("gives a tenant that sends everything to one broker that broker's share only", async () => {
    const client = new BrokerClient(first, newTenant());

    const answers = await burst([client], 10);

    expect(statuses(answers, 200)).toBeGreaterThanOrEqual(5);
    expect(statuses(answers, 200)).toBeLessThanOrEqual(7);
  });

  it('parks POP_MAX_WAITING_PER_TENANT polls of a tenant across both brokers, and answers 429 to the rest at once', async () => {
    const tenant = newTenant();
    const clients = [new BrokerClient(first, tenant), new BrokerClient(second, tenant)];
    expect((await clients[0].configure({ queue: 'idle' })).status).toBe(200);

    const polls = Array.from({ length: 8 }, (_, n) =>
      clients[n % 2].pop('idle', { wait: true, timeout: 2_000, batch: 1 }).then((answer) => answer),
    );
    const answers = await Promise.all(polls);

    expect(statuses(answers, 429)).toBe(4);
    expect(statuses(answers, 204)).toBe(4);
  });

  it("returns a dead broker's share to the survivor within the heartbeat TTL", async () => {
    // As if it died: its row is left to go stale instead of being deleted.
    jest.spyOn(second.get(BrokersRepository), 'leave').mockReturnValue(statement(sql`SELECT 1`, nothing));
    const survivor = first.get(BrokerRegistry);
    await second.close();
    secondClosed = true;
    const closedAt = performance.now();

    await waitFor(() => survivor.liveBrokers === 1, 'the survivor counts itself alone');

    // Stale after the TTL, seen at the next heartbeat; the rest is slack for a loaded machine.
    expect(performance.now() - closedAt).toBeLessThan(HEARTBEAT_MS * (LIVE_FOR_HEARTBEATS + 1) + 3_000);
    const answers = await burst([new BrokerClient(first, newTenant())], 15);
    expect(statuses(answers, 200)).toBe(10);
    expect(statuses(answers, 429)).toBe(5);
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('a broker that stops cleanly', () => {
  it('deletes its row, so the others take back its share at their next heartbeat', async () => {
    const staying = await createTestApp(env);
    const leaving = await createTestApp(env);
    try {
      const registry = staying.get(BrokerRegistry);
      await waitFor(() => registry.liveBrokers === 2, 'the brokers count each other');
      const leaveSpy = jest.spyOn(leaving.get(BrokersRepository), 'leave');

      await leaving.close();

      expect(leaveSpy).toHaveBeenCalledTimes(1);
      await waitFor(() => registry.liveBrokers === 1, 'the staying broker counts itself alone', HEARTBEAT_MS * 10);
    } finally {
      await staying.close();
    }
  });
});

(onEmbeddedDatabase ? describe.skip : describe)('pools sized from the connection budget', () => {
  it('gives each broker its part of DB_CONNECTION_BUDGET as brokers come and go, and holds it under load', async () => {
    // Sixty pushes queue for four connections a broker: on a loaded machine some wait past the 2 s default for one,
    // and a refused push is not what this holds (the pools' sizes are).
    const budgeted = { ...env, DB_CONNECTION_BUDGET: '12', DB_POOL_SIZE: '10', DB_ACQUIRE_TIMEOUT_MS: '30000' };
    const staying = await createTestApp(budgeted);
    try {
      const pool = staying.get(Database).pool;
      expect(pool.options.max).toBe(10);
      const joining = await createTestApp(budgeted);
      try {
        // 12 / 2 brokers, less each one's LISTEN and probe connections.
        await waitFor(() => pool.options.max === 4, 'the first broker shrinks its pool for the second');
        const other = joining.get(Database).pool;
        await waitFor(() => other.options.max === 4, 'the second broker takes its part');

        const clients = [new BrokerClient(staying, newTenant()), new BrokerClient(joining, newTenant())];
        const answers = await Promise.all(
          Array.from({ length: 60 }, (_, n) =>
            clients[n % 2].pushMany(`budget-${n % 6}`, 3, undefined, `b-${n}`).then((ids) => ids.length),
          ),
        );
        expect(answers.every((queued) => queued === 3)).toBe(true);
        expect(pool.totalCount).toBeLessThanOrEqual(4);
        expect(other.totalCount).toBeLessThanOrEqual(4);
      } finally {
        await joining.close();
      }
      await waitFor(() => pool.options.max === 10, 'the broker left alone takes the whole of its DB_POOL_SIZE back');
    } finally {
      await staying.close();
    }
  });
});
