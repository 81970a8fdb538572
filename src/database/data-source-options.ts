import { DataSourceOptions } from 'typeorm';
import { DatabaseConfig } from '../config/app-config';
import { workBudgetMs } from './deadline';
import { ENTITIES } from './entities';
import { guardedPg } from './guarded-pool';
import { MIGRATIONS } from './migrations';
import { TypeOrmLogger } from './typeorm-logger';

export const MIGRATIONS_TABLE = 'migrations';

/**
 * The one builder of TypeORM options, used by the application and by the
 * migration CLI (data-source.ts) so the two never drift apart.
 */
export function buildDataSourceOptions(database: DatabaseConfig, url: string): DataSourceOptions {
  return {
    type: 'postgres',
    url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: MIGRATIONS_TABLE,
    synchronize: false,
    migrationsRun: false,
    logger: new TypeOrmLogger(),
    logging: ['error', 'warn', 'migration'],
    maxQueryExecutionTime: 1_000,
    driver: guardedPg,
    extra: {
      max: database.poolSize,
      // Bounded waits everywhere: a request must fail with "pool" rather than
      // queue forever when every connection is busy or the server is gone.
      connectionTimeoutMillis: database.acquireTimeoutMs,
      statement_timeout: database.statementTimeoutMs,
      // A session whose broker died or was cut off mid-transaction would hold
      // its row locks until TCP gave up on it; the server ends it instead.
      idle_in_transaction_session_timeout: workBudgetMs(database),
      // Backstop for statements outside a TransactionRunner (boot, migrations).
      query_timeout: workBudgetMs(database),
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      idleTimeoutMillis: 30_000,
      application_name: 'leasehold',
    },
  };
}
