import { DataSourceOptions } from 'typeorm';
import { DatabaseConfig } from '../config/app-config';
import { ENTITIES } from './entities';
import { guardedPg } from './guarded-pool';
import { MIGRATIONS, MIGRATIONS_TABLE } from './migrations';
import { poolConfig } from './pool-config';
import { TypeOrmLogger } from './typeorm-logger';

/**
 * For TypeORM's CLI (data-source.ts) and the schema test, which generate and compare migrations from the entities;
 * the broker itself runs without TypeORM (Database, run-migrations.ts).
 */
export function buildDataSourceOptions(database: DatabaseConfig, url: string): DataSourceOptions {
  const { connectionString: _url, ...pool } = poolConfig(database, url);
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
    extra: pool,
  };
}
