import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { PoolUnavailableError } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { withinBudget, workBudgetMs } from './deadline';
import { canRollBack } from './guarded-pool';

/**
 * The one way a use case talks to the database: one transaction on one
 * connection, bounded end to end. The connection is acquired within
 * DB_ACQUIRE_TIMEOUT_MS (else PoolUnavailableError); the whole transaction,
 * COMMIT included, then has DB_STATEMENT_TIMEOUT_MS plus a small margin
 * (else DatabaseTimeoutError, with the connection closed so the server rolls
 * it back). A connection is never handed back with its transaction open.
 */
@Injectable()
export class TransactionRunner {
  private readonly budgetMs: number;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.budgetMs = workBudgetMs(config.database);
  }

  async run<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    let client: PoolClient;
    try {
      client = (await runner.connect()) as PoolClient;
    } catch (error) {
      await runner.release();
      throw new PoolUnavailableError(error);
    }
    try {
      return await withinBudget(client, this.budgetMs, async () => {
        await runner.startTransaction();
        try {
          const result = await work(runner.manager);
          await runner.commitTransaction();
          return result;
        } catch (error) {
          if (runner.isTransactionActive && canRollBack(client, error)) {
            await runner.rollbackTransaction().catch(() => undefined);
          }
          throw error;
        }
      });
    } finally {
      await runner.release();
    }
  }
}

