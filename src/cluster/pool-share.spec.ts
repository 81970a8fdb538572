import type { Database } from '../database/database';
import { loadConfig } from '../config/load-config';
import { DatabaseEngine } from '../database/database-engine';
import { GuardedPool } from '../database/guarded-pool';
import { Statement } from '../database/statement';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { BrokerRegistry } from './broker-registry';
import { BrokersRepository } from './brokers.repository';
import { OUTSIDE_POOL, PoolSizer, poolShare, tenantShare } from './pool-share';

/** A broker whose heartbeats count what the test says, with a pool that never connects. */
function broker(env: Record<string, string> = {}) {
  const config = loadConfig({ BROKER_HEARTBEAT_MS: '1000', ...env });
  const answers: number[] = [];
  const brokers = new BrokersRepository();
  const tenantShares: number[] = [];
  // A heartbeat's statement answers the count the test says (the others, and itself).
  const transactions = {
    runOne: (_tenant: undefined, statement: Statement<unknown>) =>
      Promise.resolve(
        statement.parse(statement.text.startsWith('WITH beat') ? [{ others: (answers.shift() ?? 1) - 1 }] : []),
      ),
    resizeTenantShare: (share: number) => tenantShares.push(share),
  } as unknown as TransactionRunner;
  const drain = { onDrain: () => undefined } as unknown as DrainService;
  const registry = new BrokerRegistry(transactions, brokers, { isEmbedded: false } as DatabaseEngine, drain, config);
  const pool = new GuardedPool({ max: config.database.poolSize });
  const sizer = new PoolSizer(registry, { pool } as unknown as Database, transactions, config);
  return { registry, answers, pool, sizer, tenantShares };
}

describe('poolShare', () => {
  it("divides the deployment's budget among the live brokers, less what each holds outside its pool", () => {
    expect([1, 7, 8, 9, 16, 30, 200].map((brokers) => poolShare(90, brokers, 10))).toEqual([10, 10, 9, 8, 3, 1, 1]);
    // Sixteen brokers, each with its pool, its LISTEN connection and its readiness probe's, within the budget.
    expect(16 * (poolShare(90, 16, 10) + OUTSIDE_POOL)).toBeLessThanOrEqual(90);
    expect(poolShare(0, 16, 10)).toBe(10);
    expect(poolShare(1_000, 3, 25)).toBe(25);
  });

  it('keeps a fifth of a smaller pool free of any one tenant, never more than DB_TENANT_MAX_CONNECTIONS', () => {
    expect([10, 5, 4, 2, 1].map((pool) => tenantShare(pool, 8))).toEqual([8, 4, 3, 1, 1]);
    expect(tenantShare(10, 3)).toBe(3);
  });
});

describe('PoolSizer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('sizes the pool from the count of each heartbeat, as brokers come and go', async () => {
    const { registry, answers, pool, sizer, tenantShares } = broker();
    answers.push(16, 16, 4, 30, 1);
    const sizes: number[] = [];

    await registry.onApplicationBootstrap();
    sizes.push(pool.options.max);
    for (let beat = 0; beat < 4; beat += 1) {
      await jest.advanceTimersByTimeAsync(1_000);
      sizes.push(pool.options.max);
    }

    expect(sizes).toEqual([3, 3, 10, 1, 10]);
    expect(sizer.poolSize).toBe(10);
    expect(tenantShares).toEqual([2, 8, 1, 8]);
    await registry.beforeApplicationShutdown();
    await pool.end();
  });

  it('leaves the pool at DB_POOL_SIZE with DB_CONNECTION_BUDGET=0', async () => {
    const { registry, answers, pool } = broker({ DB_CONNECTION_BUDGET: '0', DB_POOL_SIZE: '20' });
    answers.push(50);

    await registry.onApplicationBootstrap();

    expect(pool.options.max).toBe(20);
    await registry.beforeApplicationShutdown();
    await pool.end();
  });
});
