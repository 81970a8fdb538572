import type { ClientBase } from 'pg';
import { DataSourceOptions } from 'typeorm';
import { DatabaseConfig } from '../config/app-config';
import { workBudgetMs } from './deadline';
import { ENTITIES } from './entities';
import { guardedPg } from './guarded-pool';
import { MIGRATIONS } from './migrations';
import { SESSION_SETTINGS } from './session-settings';
import { TypeOrmLogger } from './typeorm-logger';

export const MIGRATIONS_TABLE = 'migrations';

/** Shared with the migration CLI (data-source.ts) so the two never drift apart. */
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
      // Opening one connection, not waiting for one: the runner bounds that wait by DB_ACQUIRE_TIMEOUT_MS, and a
      // connection that opens after its request gave up joins the pool for the next, even where opening takes longer.
      connectionTimeoutMillis: database.connectTimeoutMs,
      statement_timeout: database.statementTimeoutMs,
      // Else a session whose broker died mid-transaction holds its row locks until TCP gives up on it.
      idle_in_transaction_session_timeout: workBudgetMs(database),
      // Backstop for statements outside a TransactionRunner (boot, migrations).
      query_timeout: workBudgetMs(database),
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      idleTimeoutMillis: 30_000,
      application_name: 'leasehold',
      // Awaited by the pool before it hands a new connection out; a failure closes it and fails that acquire.
      onConnect: (client: ClientBase) => client.query(SESSION_SETTINGS),
    },
  };
}
