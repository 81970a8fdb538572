import 'reflect-metadata';
import { MINT_TOKEN_USAGE, MintTokenError, mintToken, parseMintTokenArgs } from '../src/auth/token-minting';
import { loadEnvFile } from '../src/config/env-file';
import { ConfigError, loadConfig } from '../src/config/load-config';

/**
 * `npm run token -- --role read-write --tenant <uuid> [--ttl 1h]`: prints a
 * token signed with the broker's own configuration. Only the token goes to
 * stdout, so `TOKEN=$(npm run --silent token -- ...)` works; everything else
 * goes to stderr.
 */
function main(argv: string[]): number {
  try {
    const request = parseMintTokenArgs(argv);
    if (request === 'help') {
      process.stdout.write(`${MINT_TOKEN_USAGE}\n`);
      return 0;
    }
    // Reads .env the same way the broker does, so both use one secret.
    loadEnvFile();
    const minted = mintToken(request, loadConfig().jwt);
    for (const warning of minted.warnings) {
      process.stderr.write(`warning: ${warning}\n`);
    }
    process.stderr.write(
      `token for tenant ${request.tenant}, ${request.roles.join(', ')}, expires ${minted.expiresAt.toISOString()}\n`,
    );
    process.stdout.write(`${minted.token}\n`);
    return 0;
  } catch (error) {
    if (error instanceof MintTokenError) {
      process.stderr.write(`error: ${error.message}\n(npm run token -- --help for usage)\n`);
      return 2;
    }
    if (error instanceof ConfigError) {
      process.stderr.write(`error: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

process.exitCode = main(process.argv.slice(2));
