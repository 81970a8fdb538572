import '../src/nest-without-icu';
import { loadEnvFile } from '../src/config/env-file';
import { loadConfig } from '../src/config/load-config';
import { errorMessage } from '../src/common/error-message';
import { migrateDatabase } from '../src/database/run-migrations';

/**
 * `npm run migration:run`: the broker's own runner, under the advisory lock brokers take at start-up, so it is safe
 * beside running or starting brokers. The embedded database migrates itself when the broker starts.
 */
async function main(): Promise<number> {
  loadEnvFile();
  const config = loadConfig();
  if (!config.database.url) {
    process.stderr.write('DATABASE_URL must be set to run migrations by hand\n');
    return 1;
  }
  await migrateDatabase(config.database, config.database.url);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${errorMessage(error)}\n`);
    process.exit(1);
  },
);
