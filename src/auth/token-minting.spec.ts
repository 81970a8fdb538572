import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode, verify } from 'jsonwebtoken';
import { JwtConfig } from '../config/app-config';
import { loadConfig } from '../config/load-config';
import { MintTokenError, mintToken, parseMintTokenArgs, MintTokenRequest } from './token-minting';
import { TokenVerifier } from './token-verifier';

const TENANT = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const SECRET = 'token-minting-spec-secret-of-32-bytes!';

const rsaPem = () =>
  generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });

function parseError(argv: string[]): string {
  try {
    parseMintTokenArgs(argv);
  } catch (error) {
    expect(error).toBeInstanceOf(MintTokenError);
    return (error as Error).message;
  }
  throw new Error('the arguments were accepted');
}

function mintError(request: MintTokenRequest, jwt: JwtConfig): string {
  try {
    mintToken(request, jwt);
  } catch (error) {
    expect(error).toBeInstanceOf(MintTokenError);
    return (error as Error).message;
  }
  throw new Error('a token was minted');
}

describe('parseMintTokenArgs', () => {
  it('reads a role, a tenant (lower-cased), a ttl and a subject', () => {
    expect(
      parseMintTokenArgs(['--role', 'read-write', '--tenant', TENANT.toUpperCase(), '--ttl', '30m', '--sub', 'ops']),
    ).toEqual({
      roles: ['read-write'],
      tenant: TENANT,
      ttlSeconds: 1800,
      subject: 'ops',
      keyFile: undefined,
    });
  });

  it('accepts repeated --role flags and comma lists, without repeats', () => {
    const parsed = parseMintTokenArgs([
      '--role',
      'read-only, write-only',
      '--role=admin',
      '--role',
      'admin',
      '--tenant',
      TENANT,
    ]);

    expect(parsed).toMatchObject({ roles: ['read-only', 'write-only', 'admin'] });
  });

  it('defaults the lifetime to one hour', () => {
    expect(parseMintTokenArgs(['--role', 'admin', '--tenant', TENANT])).toMatchObject({ ttlSeconds: 3600 });
  });

  it.each([
    ['90s', 90],
    ['7d', 604_800],
    ['365d', 31_536_000],
  ])('reads --ttl %s as %p seconds', (ttl, seconds) => {
    expect(parseMintTokenArgs(['--role', 'admin', '--tenant', TENANT, '--ttl', ttl])).toMatchObject({
      ttlSeconds: seconds,
    });
  });

  it('asks for the usage text with --help', () => {
    expect(parseMintTokenArgs(['--help'])).toBe('help');
  });

  it.each([
    ['no role', ['--tenant', TENANT], /--role is required/],
    [
      'an unknown role',
      ['--role', 'superuser', '--tenant', TENANT],
      /unknown role "superuser"; expected one of read-only/,
    ],
    ['an empty role list', ['--role', ',', '--tenant', TENANT], /--role is required/],
    ['no tenant', ['--role', 'admin'], /--tenant is required/],
    ['a tenant that is not a UUID', ['--role', 'admin', '--tenant', 'acme'], /--tenant must be a UUID, got "acme"/],
    ['a ttl without unit', ['--role', 'admin', '--tenant', TENANT, '--ttl', '60'], /--ttl must be a positive duration/],
    ['a zero ttl', ['--role', 'admin', '--tenant', TENANT, '--ttl', '0m'], /--ttl must be a positive duration/],
    ['a negative ttl', ['--role', 'admin', '--tenant', TENANT, '--ttl=-1h'], /--ttl must be a positive duration/],
    ['a ttl over a year', ['--role', 'admin', '--tenant', TENANT, '--ttl', '366d'], /--ttl must be at most 365d/],
    ['an empty subject', ['--role', 'admin', '--tenant', TENANT, '--sub', ' '], /--sub must not be empty/],
    ['an unknown flag', ['--role', 'admin', '--tenant', TENANT, '--admin'], /Unknown option '--admin'/],
    ['a stray argument', ['admin'], /Unexpected argument 'admin'/],
    ['a flag without its value', ['--tenant', TENANT, '--role'], /--role/],
  ])('refuses %s', (_case, argv, message) => {
    expect(parseError(argv)).toMatch(message);
  });
});

describe('mintToken', () => {
  const request: MintTokenRequest = { roles: ['read-write'], tenant: TENANT, ttlSeconds: 600 };

  it('signs an HS256 token with the configured secret, tenant claim, issuer and audience', () => {
    const { jwt } = loadConfig({
      JWT_ENABLED: 'true',
      JWT_SECRET: SECRET,
      JWT_ISSUER: 'https://issuer.example',
      JWT_AUDIENCE: 'leasehold',
      JWT_TENANT_CLAIM: 'org',
    });
    const now = new Date('2026-07-30T11:00:00Z');

    const minted = mintToken({ ...request, subject: 'ops' }, jwt, now);

    expect(decode(minted.token, { complete: true })?.header.alg).toBe('HS256');
    const claims = decode(minted.token) as Record<string, unknown>;
    expect(claims).toEqual({
      role: 'read-write',
      org: TENANT,
      sub: 'ops',
      iss: 'https://issuer.example',
      aud: 'leasehold',
      iat: now.getTime() / 1000,
      exp: now.getTime() / 1000 + 600,
    });
    expect(minted.expiresAt.toISOString()).toBe('2026-07-30T11:10:00.000Z');
    expect(minted.warnings).toEqual([]);
    expect(() =>
      verify(minted.token, SECRET, { algorithms: ['HS256'], clockTimestamp: claims.iat as number }),
    ).not.toThrow();
  });

  it('puts several roles in a roles array and leaves out iss, aud and sub when not configured', () => {
    const { jwt } = loadConfig({ JWT_ENABLED: 'true', JWT_SECRET: SECRET });

    const claims = decode(mintToken({ ...request, roles: ['read-only', 'write-only'] }, jwt).token) as Record<
      string,
      unknown
    >;

    expect(claims).toMatchObject({ roles: ['read-only', 'write-only'], tenant: TENANT });
    expect(Object.keys(claims).sort()).toEqual(['exp', 'iat', 'roles', 'tenant']);
  });

  it('warns when the broker does not check tokens yet', () => {
    const { jwt } = loadConfig({ JWT_SECRET: SECRET });

    expect(mintToken(request, jwt).warnings).toEqual([expect.stringMatching(/JWT_ENABLED is not true/)]);
  });

  it('refuses to mint an HS token without JWT_SECRET', () => {
    expect(mintError(request, loadConfig({}).jwt)).toMatch(/JWT_SECRET is not set/);
  });

  it('refuses --key for an HS algorithm', () => {
    const { jwt } = loadConfig({ JWT_SECRET: SECRET });

    expect(mintError({ ...request, keyFile: 'key.pem' }, jwt)).toMatch(/--key is for RS\* algorithms/);
  });

  describe('RS256', () => {
    const pair = rsaPem();
    const folder = mkdtempSync(join(tmpdir(), 'leasehold-mint-'));
    const keyFile = join(folder, 'private.pem');
    writeFileSync(keyFile, pair.privateKey);
    const rs256 = (env: Record<string, string> = {}) =>
      loadConfig({ JWT_ENABLED: 'true', JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: pair.publicKey, ...env }).jwt;

    it('signs with JWT_PRIVATE_KEY, verifiable with the configured public key', () => {
      const minted = mintToken(request, rs256({ JWT_PRIVATE_KEY: pair.privateKey.replace(/\n/g, '\\n') }));

      expect(verify(minted.token, pair.publicKey, { algorithms: ['RS256'] })).toMatchObject({ role: 'read-write' });
    });

    it('signs with the --key file, which wins over JWT_PRIVATE_KEY', () => {
      const minted = mintToken({ ...request, keyFile }, rs256({ JWT_PRIVATE_KEY: 'not a key' }));

      expect(verify(minted.token, pair.publicKey, { algorithms: ['RS256'] })).toMatchObject({ tenant: TENANT });
    });

    it('refuses without a private key', () => {
      expect(mintError(request, rs256())).toMatch(
        /JWT_ALGORITHM=RS256 needs a private key: pass --key <pem file> or set JWT_PRIVATE_KEY/,
      );
    });

    it('refuses a private key that does not match JWT_PUBLIC_KEY', () => {
      const other = rsaPem();

      expect(mintError(request, rs256({ JWT_PRIVATE_KEY: other.privateKey }))).toMatch(
        /JWT_PRIVATE_KEY does not match JWT_PUBLIC_KEY/,
      );
    });

    it('refuses a key that is not a PEM private key, and a file it cannot read', () => {
      expect(mintError(request, rs256({ JWT_PRIVATE_KEY: pair.publicKey }))).toMatch(
        /JWT_PRIVATE_KEY is not a PEM private key/,
      );
      expect(mintError({ ...request, keyFile: join(folder, 'missing.pem') }, rs256())).toMatch(
        /cannot read --key .*missing\.pem: ENOENT/,
      );
    });
  });

  describe('other public-key algorithms', () => {
    const pairOf = (type: 'ec' | 'ed25519') =>
      generateKeyPairSync(type as 'ec', {
        namedCurve: 'P-256',
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });
    const configFor = (algorithm: string, pair: { publicKey: string; privateKey: string }) =>
      loadConfig({
        JWT_ENABLED: 'true',
        JWT_ALGORITHM: algorithm,
        JWT_PUBLIC_KEY: pair.publicKey,
        JWT_PRIVATE_KEY: pair.privateKey,
        JWT_ISSUER: 'https://issuer.example.com/',
      });

    it.each(['ES256', 'EdDSA'])('signs %s with JWT_PRIVATE_KEY, accepted by the broker', async (algorithm) => {
      const config = configFor(algorithm, pairOf(algorithm === 'EdDSA' ? 'ed25519' : 'ec'));
      const minted = mintToken({ ...request, subject: 'worker' }, config.jwt);

      await expect(new TokenVerifier(config).verify(minted.token)).resolves.toMatchObject({
        role: 'read-write',
        tenant: TENANT,
        sub: 'worker',
        iss: 'https://issuer.example.com/',
      });
    });

    it('refuses a private key of another type than the algorithm needs', () => {
      const jwt = configFor('EdDSA', pairOf('ed25519')).jwt;

      expect(mintError(request, { ...jwt, privateKey: pairOf('ec').privateKey })).toMatch(
        /JWT_PRIVATE_KEY must be an Ed25519 or Ed448 private key, got ec/,
      );
    });

    it('refuses with a key set: the identity provider issues the tokens', () => {
      const { jwt } = loadConfig({ JWT_ENABLED: 'true', JWT_JWKS_URL: 'https://auth.example.com/certs' });

      expect(mintError(request, jwt)).toMatch(/JWT_JWKS_URL is set/);
    });
  });
});
