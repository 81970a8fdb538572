import '../src/nest-without-icu';
import { Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigModule } from '../src/config/config.module';
import { loadEnvFile } from '../src/config/env-file';
import { ConfigError, loadConfig } from '../src/config/load-config';
import { errorMessage } from '../src/common/error-message';
import { DatabaseModule } from '../src/database/database.module';
import { EncryptionModule } from '../src/encryption/encryption.module';
import { REENCRYPT_BATCH, Reencryption } from '../src/encryption/reencryption';
import { PinoLoggerService, rootLogger } from '../src/logging/root-logger';

const USAGE = `npm run reencrypt [-- --batch <rows>]

Seals again, under the first key of ENCRYPTION_KEYS, every stored payload sealed under another key it lists, in
batches of <rows> (default ${REENCRYPT_BATCH}) each in a transaction of its own: safe while brokers run. Once no
row of a tenant uses an old key, the key's record goes; a broker then starts without that key. Reads the broker's
settings (environment and .env). Exit 0 when nothing is left under an old key, 3 when rows were left (they do not
decrypt: see the log), 1 on an error. docs/operations.md, "Encryption at rest".`;

@Module({ imports: [ConfigModule, DatabaseModule, EncryptionModule] })
class ReencryptModule {}

function batchOf(argv: string[]): number | 'help' {
  if (argv.includes('--help') || argv.includes('-h')) return 'help';
  const at = argv.indexOf('--batch');
  if (at < 0) return REENCRYPT_BATCH;
  const rows = Number(argv[at + 1]);
  if (!Number.isSafeInteger(rows) || rows < 1 || rows > 100_000) throw new Error('--batch must be 1 to 100000 rows');
  return rows;
}

async function main(): Promise<number> {
  const batch = batchOf(process.argv.slice(2));
  if (batch === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  loadEnvFile();
  const config = loadConfig();
  Logger.overrideLogger(new PinoLoggerService(rootLogger(config.log)));
  const app = await NestFactory.createApplicationContext(ReencryptModule, { abortOnError: false });
  try {
    const report = await app.get(Reencryption).run(batch);
    new Logger('Reencryption').log(
      `Under key ${report.keyId} now: ${report.messages} messages and ${report.deadLetters} dead letters moved; ` +
        `${report.left} rows left under old keys; ${report.retired.length} tenant key records retired`,
    );
    return report.left > 0 ? 3 : 0;
  } finally {
    await app.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`error: ${error instanceof ConfigError ? error.message : errorMessage(error)}\n`);
    process.exit(1);
  },
);
