import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { Database } from '../database/database';
import { PoolShrankError } from '../database/guarded-pool';
import { TransactionRunner } from '../database/transaction-runner';
import { BrokerRegistry } from './broker-registry';

/** What each broker holds outside its pool: the LISTEN connection and the readiness probe's. */
export const OUTSIDE_POOL = 2;

/**
 * A broker's pool: an equal part of the deployment's connection budget per live broker, less what it holds outside
 * the pool, never more than DB_POOL_SIZE nor less than one. Budget 0: DB_POOL_SIZE.
 */
export function poolShare(budget: number, liveBrokers: number, poolSize: number): number {
  if (budget <= 0) return poolSize;
  const part = Math.floor(budget / Math.max(1, liveBrokers));
  return Math.max(1, Math.min(poolSize, part - OUTSIDE_POOL));
}

/** A fifth of the pool (at least one connection) stays free of any one tenant, as with DB_TENANT_MAX_CONNECTIONS. */
export function tenantShare(pool: number, configured: number): number {
  return Math.min(configured, Math.max(1, pool - Math.max(1, Math.floor(pool / 5))));
}

/**
 * Sizes this process's pool from the brokers' count at each heartbeat that changes it, so that sixteen brokers stay
 * within PostgreSQL's connections instead of asking for sixteen full pools. Connections past a smaller size close
 * when they come back, idle ones at once.
 */
@Injectable()
export class PoolSizer {
  private readonly logger = new Logger('Brokers');
  private size: number;

  constructor(
    brokers: BrokerRegistry,
    private readonly database: Database,
    private readonly transactions: TransactionRunner,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.size = config.database.poolSize;
    brokers.onCount((live) => this.resize(live));
  }

  get poolSize(): number {
    return this.size;
  }

  resize(liveBrokers: number): void {
    const { connectionBudget, poolSize } = this.config.database;
    const size = poolShare(connectionBudget, liveBrokers, poolSize);
    if (size === this.size) return;
    const pool = this.database.pool;
    this.logger.log(`${liveBrokers} brokers share ${connectionBudget} connections: this one's pool is now ${size}`);
    this.size = size;
    this.transactions.resizeTenantShare(tenantShare(size, this.config.limits.tenantMaxConnections));
    pool.options.max = size;
    // Idle connections past the size: taken (the pool hands idle ones out first) and closed.
    const idleExcess = Math.min(pool.idleCount, pool.totalCount - size);
    for (let index = 0; index < idleExcess; index += 1) {
      pool.connect().then(
        (client) => client.release(new PoolShrankError()),
        () => undefined,
      );
    }
  }
}
