import { DataSourceOptions } from 'typeorm';
import { DatabaseConfig } from '../config/app-config';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';
import { TypeOrmLogger } from './typeorm-logger';

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
    migrationsTableName: 'migrations',
    synchronize: false,
    migrationsRun: false,
    logger: new TypeOrmLogger(),
    logging: ['error', 'warn', 'migration'],
    maxQueryExecutionTime: 1_000,
    extra: {
      max: database.poolSize,
      // Bounded waits everywhere: a request must fail with "pool" rather than
      // queue forever when every connection is busy or the server is gone.
      connectionTimeoutMillis: database.acquireTimeoutMs,
      statement_timeout: database.statementTimeoutMs,
      // Client-side backstop for a server that stops answering altogether.
      query_timeout: database.statementTimeoutMs + 1_000,
      idleTimeoutMillis: 30_000,
      application_name: 'leasehold',
    },
  };
}
