import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { settingNames } from './load-config';

const ROOT = join(__dirname, '..', '..');

/** Every variable loadConfig reads: the same list a start holds the environment and .env to. */
function variablesRead(): string[] {
  return [...settingNames()].sort();
}

/** Settings that are not the broker's own: Node's, read only to pick a default. */
const NOT_SETTINGS = ['NODE_ENV'];

describe('every setting is documented where operators look', () => {
  const settings = variablesRead().filter((name) => !NOT_SETTINGS.includes(name));

  it('reads a plausible set of settings', () => {
    expect(settings).toEqual(expect.arrayContaining(['DATABASE_URL', 'PORT', 'TENANT_MAX_QUEUES']));
  });

  it('lists each in .env.example, and nothing else', () => {
    const example = readFileSync(join(ROOT, '.env.example'), 'utf8');
    const listed = [...example.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((match) => match[1]);
    expect([...new Set(listed)].sort()).toEqual(settings);
  });

  it('names each in the configuration table of docs/configuration.md, and nothing else there', () => {
    const table = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
    const named = [...table.matchAll(/^\| (.*?) \|/gm)].flatMap((row) =>
      [...row[1].matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((match) => match[1]),
    );
    expect([...new Set(named)].sort()).toEqual([...settings, 'NODE_ENV'].sort());
  });
});
