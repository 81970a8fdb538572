import { generateKeyPairSync, KeyObject, sign as signBytes } from 'node:crypto';
import { sign } from 'jsonwebtoken';
import { loadConfig } from '../config/load-config';
import { describeTokenProblem } from './token-problem';
import { TokenVerifier } from './token-verifier';

const ISSUER = 'https://idp.example.com/';
const AUDIENCE = 'leasehold';
const SKEW = 30;

const ed25519 = generateKeyPairSync('ed25519');
const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const pem = (key: KeyObject) => key.export({ type: 'spki', format: 'pem' }) as string;

function verifierFor(algorithm: string, publicKey: KeyObject): TokenVerifier {
  const config = loadConfig({
    JWT_ENABLED: 'true',
    JWT_ALGORITHM: algorithm,
    JWT_PUBLIC_KEY: pem(publicKey),
    JWT_ISSUER: ISSUER,
    JWT_AUDIENCE: AUDIENCE,
    JWT_CLOCK_SKEW_SECONDS: String(SKEW),
  });
  return new TokenVerifier(config);
}

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

function edDsaToken(payload: unknown, key: KeyObject = ed25519.privateKey, header: object = {}): string {
  const input = `${encode({ alg: 'EdDSA', typ: 'JWT', ...header })}.${encode(payload)}`;
  return `${input}.${signBytes(null, Buffer.from(input), key).toString('base64url')}`;
}

/** Signed by hand, as jsonwebtoken's sign would refuse the odd claims the cases need. */
function es256Token(payload: unknown): string {
  const input = `${encode({ alg: 'ES256', typ: 'JWT' })}.${encode(payload)}`;
  const signature = signBytes('sha256', Buffer.from(input), { key: p256.privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

/** What the broker answers a token: the claims' tenant when accepted, else the caller's text. */
async function outcome(verifier: TokenVerifier, token: string): Promise<string> {
  try {
    const claims = await verifier.verify(token);
    return `accepted ${String(claims.tenant)}`;
  } catch (error) {
    return describeTokenProblem(error);
  }
}

describe('TokenVerifier', () => {
  const eddsa = verifierFor('EdDSA', ed25519.publicKey);
  const es256 = verifierFor('ES256', p256.publicKey);
  const now = () => Math.floor(Date.now() / 1000);
  const good = () => ({ tenant: 't', iss: ISSUER, aud: AUDIENCE, exp: now() + 300 });

  it('accepts EdDSA signed by the configured Ed25519 key and ES256 by the P-256 key', async () => {
    expect(await outcome(eddsa, edDsaToken(good()))).toBe('accepted t');
    expect(await outcome(es256, es256Token(good()))).toBe('accepted t');
  });

  /* The EdDSA path checks claims itself; each case must come out as jsonwebtoken has it for ES256. */
  it.each([
    ['that is valid', {}, 'accepted t'],
    ['that expired', { exp: now() - SKEW - 5 }, 'Token expired'],
    ['that expired within the skew', { exp: now() - SKEW + 5 }, 'accepted t'],
    ['expiring exactly at the skew', { exp: now() - SKEW }, 'Token expired'],
    ['not yet valid', { nbf: now() + SKEW + 60 }, 'Token not yet valid'],
    ['not yet valid within the skew', { nbf: now() + SKEW - 5 }, 'accepted t'],
    ['with a string exp', { exp: String(now() + 300) }, 'Invalid token: malformed'],
    ['with a string nbf', { nbf: 'soon' }, 'Invalid token: malformed'],
    ['without exp', { exp: undefined }, 'Invalid token: no expiry (exp)'],
    ['of another issuer', { iss: 'https://elsewhere.example.com/' }, 'Invalid token: issuer not accepted'],
    ['without issuer', { iss: undefined }, 'Invalid token: issuer not accepted'],
    ['for another audience', { aud: 'other' }, 'Invalid token: audience not accepted'],
    ['for the audience among others', { aud: ['other', AUDIENCE] }, 'accepted t'],
    ['without audience', { aud: undefined }, 'Invalid token: audience not accepted'],
    ['expired and of another issuer', { exp: now() - SKEW - 5, iss: 'x' }, 'Token expired'],
    ['whose payload is an array', ['tenant'], 'Invalid token: audience not accepted'],
    ['whose payload is a string', 'tenant', 'Invalid token: audience not accepted'],
  ])('answers a token %s alike on both paths', async (_case, change, expected) => {
    const payload = typeof change === 'object' && !Array.isArray(change) ? { ...good(), ...change } : change;

    expect(await outcome(es256, es256Token(payload))).toBe(expected);
    expect(await outcome(eddsa, edDsaToken(payload))).toBe(expected);
  });

  it.each([
    [
      'signed by another Ed25519 key',
      () => edDsaToken(good(), generateKeyPairSync('ed25519').privateKey),
      'invalid signature',
    ],
    ['with a cut signature', () => edDsaToken(good()).slice(0, -4), 'invalid signature'],
    ['alg none', () => `${encode({ alg: 'none' })}.${encode(good())}.`, 'unsigned tokens are not accepted'],
    ['ES256 where EdDSA is configured', () => es256Token(good()), 'algorithm not accepted'],
    ['HS256 signed with the public key text', () => sign(good(), pem(ed25519.publicKey)), 'algorithm not accepted'],
    ['two parts', () => edDsaToken(good()).split('.').slice(0, 2).join('.'), 'malformed'],
  ])('refuses EdDSA %s', async (_case, token, reason) => {
    expect(await outcome(eddsa, token())).toBe(`Invalid token: ${reason}`);
  });

  it('makes no key with auth off, where the key settings are not checked', () => {
    const config = loadConfig({ JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: 'not a key' });

    expect(() => new TokenVerifier(config)).not.toThrow();
  });
});
