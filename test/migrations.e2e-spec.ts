import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/load-config';
import { Database } from '../src/database/database';
import { buildDataSourceOptions } from '../src/database/data-source-options';
import { MIGRATIONS, MIGRATIONS_TABLE } from '../src/database/migrations';
import { poolConfig } from '../src/database/pool-config';
import { MIGRATION_LOCK_KEY, migrateDatabase, migrationsUpToDate, runMigrations } from '../src/database/run-migrations';
import { ScratchDatabase } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';
import { waitFor } from './support/wait';

interface Applied {
  timestamp: string;
  name: string;
}

async function appliedIn(url: string): Promise<Applied[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<Applied>(`SELECT timestamp::text, name FROM "${MIGRATIONS_TABLE}" ORDER BY id`)).rows;
  } finally {
    await client.end();
  }
}

const EVERY_MIGRATION = MIGRATIONS.map((migration) => ({
  timestamp: migration.name.slice(-13),
  name: migration.name,
}));

/** TypeORM's CLI (`npm run migration:*`) over the same database, as an operator would run it. */
async function withCli<T>(url: string, work: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const config = loadConfig({ ...process.env, DATABASE_URL: url });
  const dataSource = await new DataSource(buildDataSourceOptions(config.database, url)).initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

(onEmbeddedDatabase ? describe.skip : describe)("the broker's migrations", () => {
  it("record what TypeORM's CLI records, so either can run after the other", async () => {
    const ours = await ScratchDatabase.create('leasehold_migrated_here');
    const theirs = await ScratchDatabase.create('leasehold_migrated_cli', { migrated: false });
    try {
      expect(await appliedIn(ours.url)).toEqual(EVERY_MIGRATION);
      // Nothing left for the CLI on a database the broker migrated.
      await expect(withCli(ours.url, (dataSource) => dataSource.showMigrations())).resolves.toBe(false);

      await withCli(theirs.url, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
      const config = loadConfig({ ...process.env, DATABASE_URL: theirs.url }).database;
      const database = new Database(poolConfig(config, theirs.url));
      try {
        // Nothing left for the broker on a database the CLI migrated: up to date, and nothing applied twice.
        await expect(migrationsUpToDate(database)).resolves.toBe(true);
        await runMigrations(database, config, theirs.url);
      } finally {
        await database.end();
      }
      expect(await appliedIn(theirs.url)).toEqual(EVERY_MIGRATION);
    } finally {
      await ours.drop();
      await theirs.drop();
    }
  }, 120_000);

  it('apply each migration once when brokers start together on a new database', async () => {
    const scratch = await ScratchDatabase.create('leasehold_migrated_twice', { migrated: false });
    try {
      const config = loadConfig({ ...process.env, DATABASE_URL: scratch.url }).database;
      await Promise.all([migrateDatabase(config, scratch.url), migrateDatabase(config, scratch.url)]);

      expect(await appliedIn(scratch.url)).toEqual(EVERY_MIGRATION);
    } finally {
      await scratch.drop();
    }
  }, 120_000);

  it('run by hand (npm run migration:run) under the lock a starting broker holds', async () => {
    const scratch = await ScratchDatabase.create('leasehold_migrated_by_hand', { migrated: false });
    const holder = new Client({ connectionString: scratch.url });
    await holder.connect();
    let exited: Promise<number | null> | undefined;
    try {
      // A broker migrating this database now holds the lock.
      await holder.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
      exited = new Promise((resolve) => {
        const root = join(__dirname, '..');
        const child = execFile(
          process.execPath,
          ['-r', join(root, 'test/support/ts-register.js'), join(root, 'scripts/migrate.ts')],
          { cwd: root, env: { ...process.env, DATABASE_URL: scratch.url } },
        );
        child.on('exit', resolve);
      });
      await waitFor(
        async () => {
          const { rows } = await holder.query<{ asking: boolean }>(
            `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database()
                               AND application_name = 'leasehold-migrations'
                               AND query LIKE '%pg_try_advisory_lock%') AS asking`,
          );
          return rows[0].asking;
        },
        'the script asking for the migrations lock',
        60_000,
      );
      // Asked for the lock and not given it: nothing applied yet.
      const { rows } = await holder.query<{ table: string | null }>(
        `SELECT to_regclass('${MIGRATIONS_TABLE}')::text AS table`,
      );
      expect(rows[0].table).toBeNull();

      await holder.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`);
      await expect(exited).resolves.toBe(0);
      expect(await appliedIn(scratch.url)).toEqual(EVERY_MIGRATION);
    } finally {
      await holder.end();
      await exited;
      await scratch.drop();
    }
  }, 120_000);

  it('tell a database with a migration pending from one without', async () => {
    const scratch = await ScratchDatabase.create('leasehold_migration_pending');
    const config = loadConfig({ ...process.env, DATABASE_URL: scratch.url }).database;
    const database = new Database(poolConfig(config, scratch.url));
    try {
      await expect(migrationsUpToDate(database)).resolves.toBe(true);
      const last = EVERY_MIGRATION[EVERY_MIGRATION.length - 1].name;
      await database.query(`DELETE FROM "${MIGRATIONS_TABLE}" WHERE name = $1`, [last]);

      await expect(migrationsUpToDate(database)).resolves.toBe(false);
    } finally {
      await database.end();
      await scratch.drop();
    }
  }, 60_000);
});
