import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/load-config';
import { EmbeddedPostgres } from '../src/database/embedded-postgres';
import { migrateDatabase } from '../src/database/run-migrations';

declare global {
  var __LEASEHOLD_EMBEDDED__: EmbeddedPostgres | undefined;
}

/**
 * One database for the whole run: the server named by DATABASE_URL, or an
 * embedded PGlite in a temporary folder. It is migrated here, once, so test
 * files booting the app in parallel find the schema ready. Workers inherit
 * DATABASE_URL because they are forked after this runs.
 */
export default async function globalSetup(): Promise<void> {
  if (!process.env.DATABASE_URL) {
    const embedded = await EmbeddedPostgres.start({
      dataDir: mkdtempSync(join(tmpdir(), 'leasehold-test-')),
      maxConnections: 200,
    });
    globalThis.__LEASEHOLD_EMBEDDED__ = embedded;
    process.env.DATABASE_URL = embedded.url;
    process.env.LEASEHOLD_TEST_EMBEDDED = '1';
  }
  const config = loadConfig();
  await migrateDatabase(config.database, config.database.url!);
}
