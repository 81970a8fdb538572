import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { loadConfig } from '../../src/config/load-config';
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
