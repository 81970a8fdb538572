import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEnvFile } from './env-file';

describe('loadEnvFile', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-env-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function envFile(content: string): string {
    const path = join(dir, '.env');
    writeFileSync(path, content);
    return path;
  }

  it('copies every variable of the file into the environment and names them', () => {
    const env: Record<string, string | undefined> = {};
    const path = envFile('# comment\nPORT=7000\nexport DB_POOL_SIZE=4 # inline comment\nJWT_SECRET="a b"\n');

    expect(loadEnvFile(path, env).sort()).toEqual(['DB_POOL_SIZE', 'JWT_SECRET', 'PORT']);
    expect(env).toEqual({ PORT: '7000', DB_POOL_SIZE: '4', JWT_SECRET: 'a b' });
  });

  it('keeps a variable the environment already sets, even to an empty string', () => {
    const env: Record<string, string | undefined> = { PORT: '6632', TENANT_HEADER: '' };
    const path = envFile('PORT=7000\nTENANT_HEADER=x-tenant\nHOST=127.0.0.1\n');

    expect(loadEnvFile(path, env)).toEqual(['HOST']);
    expect(env).toEqual({ PORT: '6632', TENANT_HEADER: '', HOST: '127.0.0.1' });
  });

  it('reads quoted multi-line values and leaves escaped newlines to loadConfig', () => {
    const env: Record<string, string | undefined> = {};
    const path = envFile(
      'JWT_PUBLIC_KEY="-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"\nJWT_PRIVATE_KEY=\'one\\ntwo\'\n',
    );

    loadEnvFile(path, env);

    expect(env.JWT_PUBLIC_KEY).toBe('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----');
    expect(env.JWT_PRIVATE_KEY).toBe('one\\ntwo');
  });

  it('does nothing when there is no file', () => {
    const env: Record<string, string | undefined> = { PORT: '6632' };

    expect(loadEnvFile(join(dir, 'missing.env'), env)).toEqual([]);
    expect(env).toEqual({ PORT: '6632' });
  });

  it('fails on a path it cannot read as a file', () => {
    expect(() => loadEnvFile(dir, {})).toThrow(/EISDIR/);
  });
});
