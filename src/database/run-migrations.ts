import { Logger } from '@nestjs/common';
import { Client, ClientBase } from 'pg';
import { DatabaseConfig } from '../config/app-config';
import { Database, queryRows } from './database';
import { poolConfig } from './pool-config';
import { MIGRATIONS, MIGRATIONS_TABLE } from './migrations';
import { connectSession } from './session-settings';

/** Arbitrary but fixed: every broker process contends for the same key. */
export const MIGRATION_LOCK_KEY = 7_346_291_044;

/** How often a broker waiting for another's migrations asks for the lock again. */
const LOCK_RETRY_MS = 250;

/** What a migration is handed: TypeORM's QueryRunner as far as the migrations use it. */
export interface MigrationRunner {
  query<T = any>(text: string, values?: unknown[]): Promise<T[]>;
}

/** A migration as the TypeORM CLI writes one; `transaction = false` runs it outside a transaction. */
interface Migration {
  readonly transaction?: boolean;
  up(runner: MigrationRunner): Promise<void>;
}

interface Known {
  name: string;
  timestamp: number;
  migration: Migration;
}

/** In TypeORM's order and under its names (the class name, ending in its timestamp), so its CLI and ours agree. */
function knownMigrations(): Known[] {
  return MIGRATIONS.map((Class) => ({
    name: Class.name,
    timestamp: Number(Class.name.slice(-13)),
    migration: new Class(),
  })).sort((a, b) => a.timestamp - b.timestamp);
}

/** TypeORM's own table, as its CLI makes it. */
const MIGRATIONS_TABLE_DDL =
  `CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" ("id" SERIAL NOT NULL, "timestamp" bigint NOT NULL, ` +
  `"name" character varying NOT NULL, CONSTRAINT "PK_8c82d7f526340ab734260ea46be" PRIMARY KEY ("id"))`;

/**
 * Migrations run one at a time under an advisory lock, whose connection is outside the pool lest a pool of one
 * deadlock. They run on a connection of their own without the broker's statement timeout: an index built
 * CONCURRENTLY on a table of millions of rows takes minutes, and waits for every transaction older than it.
 */
export async function runMigrations(database: Database, config: DatabaseConfig, url: string): Promise<void> {
  if (await migrationsUpToDate(database)) return;
  const logger = new Logger('Migrations');
  const session = (applicationName: string): Client => {
    const client = new Client({
      connectionString: url,
      application_name: applicationName,
      // The pool's connect timeout, so a database that does not answer fails the boot instead of hanging it.
      connectionTimeoutMillis: config.connectTimeoutMs,
      keepAlive: true,
    });
    // Without a listener a lost connection would be an unhandled 'error' event; the next statement fails anyway.
    client.on('error', (error) => logger.warn(`Migration connection lost: ${error.message}`));
    return client;
  };
  const lockClient = session('leasehold-migrations');
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
    const client = session('leasehold');
    await connectSession(client);
    try {
      const applied = await applyPending(client);
      if (applied.length > 0) logger.log(`Applied ${applied.join(', ')}`);
    } finally {
      await client.end();
    }
  } finally {
    await lockClient.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`).catch(() => undefined);
    await lockClient.end();
  }
}

/** Each pending migration and its row in the table in one transaction, unless it runs outside one. */
async function applyPending(client: ClientBase): Promise<string[]> {
  const runner: MigrationRunner = { query: (text, values) => queryRows(client, text, values) };
  await client.query(MIGRATIONS_TABLE_DDL);
  const names = await client.query<{ name: string }>(`SELECT name FROM "${MIGRATIONS_TABLE}"`);
  const done = new Set(names.rows.map((row) => row.name));
  const applied: string[] = [];
  for (const { name, timestamp, migration } of knownMigrations()) {
    if (done.has(name)) continue;
    const inTransaction = migration.transaction !== false;
    if (inTransaction) await client.query('BEGIN');
    try {
      await migration.up(runner);
      await client.query(`INSERT INTO "${MIGRATIONS_TABLE}" ("timestamp", "name") VALUES ($1, $2)`, [timestamp, name]);
      if (inTransaction) await client.query('COMMIT');
    } catch (error) {
      if (inTransaction) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
    applied.push(name);
  }
  return applied;
}

/** One transaction: the embedded server can interleave statements run outside one. */
export async function migrationsUpToDate(database: Database): Promise<boolean> {
  const rows = await database.transaction(async (session) => {
    const [table] = await session.query<{ exists: boolean }>(
      `SELECT to_regclass('${MIGRATIONS_TABLE}') IS NOT NULL AS exists`,
    );
    return table.exists ? session.query<{ name: string }>(`SELECT name FROM "${MIGRATIONS_TABLE}"`) : [];
  });
  const applied = new Set(rows.map((row) => row.name));
  return knownMigrations().every(({ name }) => applied.has(name));
}

export async function migrateDatabase(config: DatabaseConfig, url: string): Promise<void> {
  const database = new Database(poolConfig(config, url));
  try {
    await runMigrations(database, config, url);
  } finally {
    await database.end();
  }
}
