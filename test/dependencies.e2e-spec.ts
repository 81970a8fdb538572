import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { subset, validRange } from 'semver';

const ROOT = join(__dirname, '..');

interface LockedPackage {
  dev?: boolean;
  engines?: { node?: string };
}

/** `npm ci` on a Node version that `engines` allows must not warn EBADENGINE for anything the broker runs on. */
describe('package.json engines', () => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockedPackage>;
  };

  it('allows no Node version that a production dependency refuses', () => {
    const ours = manifest.engines.node;
    expect(validRange(ours)).not.toBeNull();
    const refusing = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== '' && !entry.dev && entry.engines?.node !== undefined)
      .filter(([, entry]) => !subset(ours, entry.engines!.node!))
      .map(([path, entry]) => `${path.replace(/^node_modules\//, '')} wants ${entry.engines!.node}`);
    expect(refusing).toEqual([]);
  });
});

/** The code uses these packages' internals (docs/internals.md): an upgrade is a change of its own, tested. */
const INTERNALS_USED: Record<string, 'exact' | 'patch'> = {
  pg: 'exact',
  'pg-protocol': 'exact',
  express: 'patch',
  '@nestjs/common': 'patch',
  '@nestjs/core': 'patch',
  '@nestjs/platform-express': 'patch',
};

describe('package.json ranges', () => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };

  it.each(Object.entries(INTERNALS_USED))('holds %s, whose internals the code uses, to %s releases', (name, hold) => {
    const range = manifest.dependencies[name];
    expect(range).toMatch(hold === 'exact' ? /^\d+\.\d+\.\d+$/ : /^~\d+\.\d+\.\d+$/);
  });
});
