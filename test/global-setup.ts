import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { loadConfig } from '../src/config/load-config';
import { EmbeddedPostgres } from '../src/database/embedded-postgres';
import { migrateDatabase } from '../src/database/run-migrations';
import { TEST_ENCRYPTION_KEYS } from './support/encryption-keys';

declare global {
  var __LEASEHOLD_EMBEDDED__: EmbeddedPostgres | undefined;
  var __LEASEHOLD_TEST_ROOT__: string | undefined;
}

/**
 * One database for the whole run: the server named by DATABASE_URL, or an
 * embedded PGlite in a temporary folder. It is migrated here, once, so test
 * files booting the app in parallel find the schema ready. Workers inherit
 * DATABASE_URL because they are forked after this runs.
 *
 * The run gets a folder of its own as TMPDIR, which every worker and every
 * process a test starts inherit, and a mark (LEASEHOLD_TEST_RUN) in their
 * environment: the teardown removes the one and ends whatever carries the other.
 *
 * Every broker of the run gets one encryption key (TEST_ENCRYPTION_KEYS): a broker refuses to start on a database
 * where a queue has encryptionEnabled and it has no key, and the files share one database.
 */
export default async function globalSetup(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'leasehold-test-run-'));
  globalThis.__LEASEHOLD_TEST_ROOT__ = root;
  process.env.TMPDIR = root;
  process.env.LEASEHOLD_TEST_RUN = basename(root);
  process.env.ENCRYPTION_KEYS ??= TEST_ENCRYPTION_KEYS;
  if (!process.env.DATABASE_URL) {
    const embedded = await EmbeddedPostgres.start({
      dataDir: mkdtempSync(join(root, 'embedded-')),
      maxConnections: 200,
    });
    globalThis.__LEASEHOLD_EMBEDDED__ = embedded;
    process.env.DATABASE_URL = embedded.url;
    process.env.LEASEHOLD_TEST_EMBEDDED = '1';
  }
  const config = loadConfig();
  await migrateDatabase(config.database, config.database.url!);
}
