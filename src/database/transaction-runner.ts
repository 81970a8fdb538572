import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { ConnectionLostError, databaseFailureOf } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { connectWithin, monotonicNow, withinBudget, workBudgetMs } from './deadline';
import { asQueryFailed } from './database-engine';
import { canRollBack } from './guarded-pool';
import { TenantGate } from './tenant-gate';

/**
 * The one way a use case talks to the database: one transaction on one
 * connection, bounded end to end. The connection is acquired within
 * DB_ACQUIRE_TIMEOUT_MS, including any wait for the tenant's share of the
 * pool (else PoolUnavailableError); the whole transaction, COMMIT included,
 * then has DB_STATEMENT_TIMEOUT_MS plus a small margin (else
 * DatabaseTimeoutError, with the connection closed so the server rolls it
 * back). A connection is never handed back with its transaction open.
 */
@Injectable()
export class TransactionRunner {
  private readonly budgetMs: number;
  private readonly acquireTimeoutMs: number;
  private readonly gate: TenantGate;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.budgetMs = workBudgetMs(config.database);
    this.acquireTimeoutMs = config.database.acquireTimeoutMs;
    this.gate = new TenantGate(config.limits.tenantMaxConnections);
  }

  /**
   * `tenantId` undefined: work on no tenant's behalf (the health check),
   * outside any tenant's share. `withCommit`, once the work is done, may give
   * statements without parameters to send in COMMIT's own round trip.
   */
  async run<T>(
    tenantId: string | undefined,
    work: (manager: EntityManager) => Promise<T>,
    withCommit?: () => string | undefined,
  ): Promise<T> {
    const started = monotonicNow();
    const leave = tenantId === undefined ? () => undefined : await this.gate.enter(tenantId, this.acquireTimeoutMs);
    try {
      const runner = this.dataSource.createQueryRunner();
      const client = await runnerConnectionWithin(runner, this.acquireTimeoutMs - (monotonicNow() - started));
      let lostWith: Error | undefined;
      const onLost = (error: Error): void => {
        lostWith ??= error;
      };
      client.on('error', onLost);
      try {
        return await withinBudget(client, this.budgetMs, async () => {
          await runner.startTransaction();
          try {
            const result = await work(runner.manager);
            await commit(runner, client, withCommit?.());
            return result;
          } catch (error) {
            if (runner.isTransactionActive && canRollBack(client, error)) {
              await runner.rollbackTransaction().catch(() => undefined);
            }
            // Once the connection died, TypeORM's own errors (a released query runner) only hide that.
            throw lostWith && !databaseFailureOf(error) ? new ConnectionLostError(lostWith) : error;
          }
        });
      } finally {
        client.removeListener('error', onLost);
        await runner.release();
      }
    } finally {
      leave();
    }
  }
}

/**
 * COMMIT, with `statements` ahead of it in one simple query: if one fails,
 * the server skips the rest and the transaction is rolled back as for any
 * failed statement.
 */
async function commit(runner: QueryRunner, client: PoolClient, statements: string | undefined): Promise<void> {
  if (statements === undefined) return runner.commitTransaction();
  const text = `${statements}; COMMIT`;
  try {
    await client.query(text);
  } catch (error) {
    throw asQueryFailed(text, undefined, error);
  }
  (runner as { isTransactionActive: boolean }).isTransactionActive = false;
}

/**
 * The runner's connection within `timeoutMs` (the pool's own acquire timeout
 * bounds it too). One that arrives after the caller gave up goes straight back.
 */
function runnerConnectionWithin(runner: QueryRunner, timeoutMs: number): Promise<PoolClient> {
  const release = (): void => void runner.release();
  return connectWithin<PoolClient>(() => runner.connect(), timeoutMs, { late: release, failed: release });
}
