import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const PRINT_URL = `require(${JSON.stringify(require.resolve('reflect-metadata'))});
const options = require(${JSON.stringify(join(ROOT, 'src/database/data-source.ts'))}).default.options;
process.stdout.write(options.url);`;

/** Loads the CLI's data source the way `typeorm -d` does, in a fresh process whose working directory is `cwd`. */
async function cliDataSourceUrl(cwd: string, env: Record<string, string>): Promise<string> {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['-r', join(ROOT, 'test/support/ts-register.js'), '-e', PRINT_URL],
    { cwd, env: { ...inherited, ...env } },
  );
  return stdout;
}

describe('the migration CLI data source', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-cli-'));
    writeFileSync(join(dir, '.env'), 'DATABASE_URL=postgres://from-file@127.0.0.1:5432/leasehold\n');
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('takes DATABASE_URL from .env in the working directory, as the broker does', async () => {
    await expect(cliDataSourceUrl(dir, {})).resolves.toBe('postgres://from-file@127.0.0.1:5432/leasehold');
  }, 30_000);

  it('prefers DATABASE_URL from the environment over .env', async () => {
    const url = 'postgres://from-env@127.0.0.1:5432/leasehold';

    await expect(cliDataSourceUrl(dir, { DATABASE_URL: url })).resolves.toBe(url);
  }, 30_000);
});
