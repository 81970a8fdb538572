import { KeyObject } from 'node:crypto';

export const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
export const PUBLIC_KEY_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
/** `none` is not among them: an unsigned token is never accepted. */
export const JWT_ALGORITHMS = [...HMAC_ALGORITHMS, ...PUBLIC_KEY_ALGORITHMS] as const;
export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number];

export function isHmac(algorithm: JwtAlgorithm): boolean {
  return algorithm.startsWith('HS');
}

/** ES* names the curve as well as the hash: a P-384 key cannot sign ES256 (RFC 7518 3.4). */
const EC_CURVES: Record<string, { node: string; jose: string }> = {
  ES256: { node: 'prime256v1', jose: 'P-256' },
  ES384: { node: 'secp384r1', jose: 'P-384' },
  ES512: { node: 'secp521r1', jose: 'P-521' },
};
export const MIN_RSA_BITS = 2048;

/** Why `key` cannot verify `algorithm`, or undefined when it can. Never echoes the key. */
export function keyMismatch(key: KeyObject, algorithm: JwtAlgorithm): string | undefined {
  const type = key.asymmetricKeyType ?? 'an unknown key type';
  if (algorithm.startsWith('RS') || algorithm.startsWith('PS')) {
    if (type !== 'rsa' && !(algorithm.startsWith('PS') && type === 'rsa-pss')) {
      return `must be an RSA key, got ${type}`;
    }
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) return `must be at least ${MIN_RSA_BITS} bits, got ${bits}`;
    return undefined;
  }
  if (algorithm.startsWith('ES')) {
    if (type !== 'ec') return `must be an EC key, got ${type}`;
    const curve = EC_CURVES[algorithm];
    const actual = key.asymmetricKeyDetails?.namedCurve;
    if (actual !== curve.node) return `must be on curve ${curve.jose} for ${algorithm}, got ${actual ?? 'none'}`;
    return undefined;
  }
  if (algorithm === 'EdDSA') {
    return type === 'ed25519' || type === 'ed448' ? undefined : `must be an Ed25519 or Ed448 key, got ${type}`;
  }
  return `cannot verify ${algorithm}`;
}
