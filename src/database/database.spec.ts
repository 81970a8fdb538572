import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');

/** Every module the broker's application loads, in a fresh process, as main.ts loads them. */
const LOADED_PACKAGES = `require('reflect-metadata');
require(${JSON.stringify(join(ROOT, 'src/app.module.ts'))});
require(${JSON.stringify(join(ROOT, 'src/setup-app.ts'))});
const names = Object.keys(require.cache).map((file) => (file.match(/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//) ?? [])[1]);
process.stdout.write(JSON.stringify([...new Set(names.filter(Boolean))]));`;

describe("the broker's modules", () => {
  it('load no TypeORM: its CLI and the schema test use it, the running broker does not (docs/performance.md)', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-r', join(ROOT, 'test/support/ts-register.js'), '-e', LOADED_PACKAGES],
      { cwd: ROOT },
    );
    const packages = JSON.parse(stdout) as string[];

    expect(packages).toEqual(expect.arrayContaining(['@nestjs/core', 'pg']));
    expect(packages.filter((name) => name.includes('typeorm'))).toEqual([]);
  }, 60_000);
});
