import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, QueryRunner } from 'typeorm';
import { loadConfig } from '../../src/config/load-config';
import { buildDataSourceOptions } from '../../src/database/data-source-options';
import { migrateDatabase } from '../../src/database/run-migrations';

/**
 * A migrated database of its own on the test run's PostgreSQL, for a test whose outcome other files' rows would
 * change (the retention job works across tenants) or whose schema changes would hold up theirs. Real PostgreSQL only.
 */
export class ScratchDatabase {
  private constructor(
    private readonly admin: Client,
    readonly name: string,
    readonly url: string,
  ) {}

  /** `migrated: false` leaves it empty, for a test of what the broker's own start-up does to it. */
  static async create(prefix: string, { migrated = true }: { migrated?: boolean } = {}): Promise<ScratchDatabase> {
    const url = new URL(process.env.DATABASE_URL!);
    const name = `${prefix}_${randomBytes(4).toString('hex')}`;
    const admin = new Client({ connectionString: url.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    url.pathname = `/${name}`;
    const scratch = new ScratchDatabase(admin, name, url.toString());
    if (!migrated) return scratch;
    try {
      await migrateDatabase(loadConfig({ ...process.env, DATABASE_URL: scratch.url }).database, scratch.url);
    } catch (error) {
      await scratch.drop();
      throw error;
    }
    return scratch;
  }

  async drop(): Promise<void> {
    try {
      await this.admin.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    } finally {
      await this.admin.end();
    }
  }
}

/**
 * A migrated scratch database for the enclosing describe block, with a query runner on it (a migration's up and down
 * take one), gone after the block. Read `runner` inside hooks and tests: it is set once the block starts.
 */
export function useScratchRunner(prefix: string): { readonly runner: QueryRunner } {
  const held = {} as { runner: QueryRunner; dataSource: DataSource; database: ScratchDatabase };
  beforeAll(async () => {
    held.database = await ScratchDatabase.create(prefix);
    const config = loadConfig({ ...process.env, DATABASE_URL: held.database.url });
    held.dataSource = await new DataSource(buildDataSourceOptions(config.database, held.database.url)).initialize();
    held.runner = held.dataSource.createQueryRunner();
  });
  afterAll(async () => {
    await held.runner?.release();
    await held.dataSource?.destroy();
    await held.database?.drop();
  });
  return held;
}
