import { createHmac, generateKeyPairSync } from 'node:crypto';
import { sign, SignOptions } from 'jsonwebtoken';

export const TEST_JWT_SECRET = 'leasehold-test-secret-with-enough-entropy';

export function hsToken(claims: Record<string, unknown>, options: SignOptions = {}, secret = TEST_JWT_SECRET): string {
  return sign(claims, secret, { algorithm: 'HS256', expiresIn: '5m', ...options });
}

const base64url = (value: object | Buffer) =>
  (Buffer.isBuffer(value) ? value : Buffer.from(JSON.stringify(value))).toString('base64url');

const inFiveMinutes = () => Math.floor(Date.now() / 1000) + 300;

/** An `alg: none` token, with an empty signature or with whatever `signature` is given. */
export function unsignedToken(claims: Record<string, unknown>, signature = ''): string {
  return `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ exp: inFiveMinutes(), ...claims })}.${signature}`;
}

/**
 * The classic algorithm-confusion token: HS256 whose HMAC key is the text of
 * the server's RSA public key. Built by hand so no library check stands
 * between the attack and the broker.
 */
export function hmacTokenWithKeyText(claims: Record<string, unknown>, keyText: string): string {
  const signingInput = `${base64url({ alg: 'HS256', typ: 'JWT' })}.${base64url({ exp: inFiveMinutes(), ...claims })}`;
  return `${signingInput}.${base64url(createHmac('sha256', keyText).update(signingInput).digest())}`;
}

/** An RS256 token from a key pair nobody configured. */
export function rs256TokenFromAnyKey(claims: Record<string, unknown>): string {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return sign(claims, privateKey, { algorithm: 'RS256', expiresIn: '5m' });
}
