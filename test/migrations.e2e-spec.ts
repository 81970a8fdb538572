import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/load-config';
import { Database } from '../src/database/database';
import { buildDataSourceOptions } from '../src/database/data-source-options';
import { MIGRATIONS, MIGRATIONS_TABLE } from '../src/database/migrations';
import { poolConfig } from '../src/database/pool-config';
import { migrateDatabase, migrationsUpToDate, runMigrations } from '../src/database/run-migrations';
import { ScratchDatabase } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';

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
