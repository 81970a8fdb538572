import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { DatabaseConfig } from '../config/app-config';
import { buildDataSourceOptions, MIGRATIONS_TABLE } from './data-source-options';
import { connectSession } from './session-settings';

/** Arbitrary but fixed: every broker process contends for the same key. */
const MIGRATION_LOCK_KEY = 7_346_291_044;

/** How often a broker waiting for another's migrations asks for the lock again. */
const LOCK_RETRY_MS = 250;

/**
 * TypeORM's runner takes no lock; this advisory lock's connection is outside the pool, lest a pool of one deadlock.
 * The migrations run on connections of their own without the broker's statement timeout: an index built
 * CONCURRENTLY on a table of millions of rows takes minutes, and waits for every transaction older than it.
 */
export async function runMigrations(dataSource: DataSource, url: string): Promise<void> {
  if (await migrationsUpToDate(dataSource)) return;
  const logger = new Logger('Migrations');
  const lockClient = new Client({
    connectionString: url,
    application_name: 'leasehold-migrations',
    // The pool's connect timeout, so a database that does not answer fails the boot instead of hanging it.
    connectionTimeoutMillis: (dataSource.options.extra as { connectionTimeoutMillis?: number } | undefined)
      ?.connectionTimeoutMillis,
    keepAlive: true,
  });
  // Without a listener a lost connection would be an unhandled 'error' event; the lock query fails anyway.
  lockClient.on('error', (error) => logger.warn(`Migration lock connection lost: ${error.message}`));
  await connectSession(lockClient);
  try {
    // Asked again and again, not waited for in one statement: a waiting statement holds a snapshot, which an index
    // the holder builds CONCURRENTLY waits for, while the waiter waits for the holder: neither would move.
    // Simple protocol: the embedded server may interleave other connections' messages in a parameterised statement.
    for (;;) {
      const [{ locked }] = (await lockClient.query(`SELECT pg_try_advisory_lock(${MIGRATION_LOCK_KEY}) AS locked`))
        .rows as Array<{ locked: boolean }>;
      if (locked) break;
      await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
    }
    const extra = (dataSource.options as { extra?: Record<string, unknown> }).extra ?? {};
    const migrating = new DataSource({
      ...dataSource.options,
      extra: { ...extra, max: 2, statement_timeout: 0, query_timeout: undefined },
    });
    await migrating.initialize();
    try {
      const applied = await migrating.runMigrations({ transaction: 'each' });
      if (applied.length > 0) {
        logger.log(`Applied ${applied.map((migration) => migration.name).join(', ')}`);
      }
    } finally {
      await migrating.destroy();
    }
  } finally {
    await lockClient.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`).catch(() => undefined);
    await lockClient.end();
  }
}

/** One transaction: TypeORM's own checks run outside one, which the embedded server can interleave. */
export async function migrationsUpToDate(dataSource: DataSource): Promise<boolean> {
  return dataSource.transaction(async (manager) => {
    const [table]: Array<{ exists: boolean }> = await manager.query(
      `SELECT to_regclass('${MIGRATIONS_TABLE}') IS NOT NULL AS exists`,
    );
    if (!table.exists) return false;
    const rows: Array<{ name: string }> = await manager.query(`SELECT name FROM ${MIGRATIONS_TABLE}`);
    const applied = new Set(rows.map((row) => row.name));
    return dataSource.migrations.every((migration) => migration.name !== undefined && applied.has(migration.name));
  });
}

export async function migrateDatabase(database: DatabaseConfig, url: string): Promise<void> {
  const dataSource = await new DataSource(buildDataSourceOptions(database, url)).initialize();
  try {
    await runMigrations(dataSource, url);
  } finally {
    await dataSource.destroy();
  }
}
