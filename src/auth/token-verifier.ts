import { createPublicKey, createSecretKey, KeyObject, verify as verifySignature } from 'node:crypto';
import { HttpStatus, Inject, Injectable } from '@nestjs/common';
import { decode, JsonWebTokenError, NotBeforeError, TokenExpiredError, verify } from 'jsonwebtoken';
import { RetryLaterException } from '../common/retry-later.exception';
import { APP_CONFIG, AppConfig, JwtConfig } from '../config/app-config';
import { isHmac, JwtAlgorithm, keyMismatch } from '../config/jwt-algorithms';
import { IdentityProviderUnavailableError, JwksKeySet } from './jwks-key-set';
import { TokenClaims } from './token-claims';

export const IDENTITY_PROVIDER_UNAVAILABLE = 'Identity provider unavailable';

interface ClaimChecks {
  issuer: string | undefined;
  audience: string | undefined;
  clockToleranceSeconds: number;
}

/**
 * The header's algorithm must be one of the configured ones before any key is looked at, so `alg: none`, HS* against
 * a public key (algorithm confusion) and made-up kids with a foreign algorithm never reach a key or the provider.
 * jsonwebtoken verifies every algorithm but EdDSA, which it lacks; that one is checked here, claims the same way.
 */
@Injectable()
export class TokenVerifier {
  private readonly jwt: JwtConfig;
  private readonly secret: KeyObject | undefined;
  private readonly publicKey: KeyObject | undefined;
  private readonly jwks: JwksKeySet | undefined;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.jwt = config.jwt;
    // Given a string, jsonwebtoken tries it as a public key on every verification first: a quarter of the CPU under
    // a flood of authenticated requests. Key objects are made once. With auth off the key settings go unchecked
    // and nothing is verified, so none are made.
    const { enabled, secret, publicKey, jwks } = this.jwt;
    this.secret = enabled && secret ? createSecretKey(Buffer.from(secret, 'utf8')) : undefined;
    this.publicKey = enabled && jwks === undefined && publicKey ? createPublicKey(publicKey) : undefined;
    this.jwks = enabled && jwks ? new JwksKeySet(jwks) : undefined;
  }

  async verify(token: string): Promise<TokenClaims> {
    const parts = token.split('.');
    if (parts.length !== 3) throw new JsonWebTokenError('jwt malformed');
    const decoded = decode(token, { complete: true });
    if (!decoded) throw new JsonWebTokenError('invalid token');
    if (parts[2].trim() === '') throw new JsonWebTokenError('jwt signature is required');
    const algorithm = this.jwt.algorithms.find((accepted) => accepted === decoded.header.alg);
    if (algorithm === undefined) throw new JsonWebTokenError('invalid algorithm');
    const key = await this.keyFor(algorithm, decoded.header.kid);
    const checks: ClaimChecks = this.jwt;
    const claims: unknown =
      algorithm === 'EdDSA'
        ? verifyEdDsa(parts, decoded.payload, key, checks)
        : verify(token, key, {
            algorithms: [algorithm],
            issuer: checks.issuer,
            audience: checks.audience,
            clockTolerance: checks.clockToleranceSeconds,
          });
    if (claims === null || typeof claims !== 'object' || Array.isArray(claims)) {
      throw new JsonWebTokenError('jwt malformed');
    }
    // jsonwebtoken accepts a token without `exp` forever; a leaked one could only be revoked by rotating the key.
    if (typeof (claims as TokenClaims).exp !== 'number') throw new JsonWebTokenError('no expiry');
    return claims as TokenClaims;
  }

  private async keyFor(algorithm: JwtAlgorithm, kid: unknown): Promise<KeyObject> {
    if (this.jwks === undefined) {
      const key = isHmac(algorithm) ? this.secret : this.publicKey;
      if (key === undefined) throw new JsonWebTokenError('invalid algorithm');
      return key;
    }
    let published;
    try {
      published = await this.jwks.keyFor(typeof kid === 'string' ? kid : undefined);
    } catch (error) {
      if (!(error instanceof IdentityProviderUnavailableError)) throw error;
      // Not the token's fault: a client told 401 would drop a good token; 503 asks it to come back.
      throw new RetryLaterException(
        HttpStatus.SERVICE_UNAVAILABLE,
        IDENTITY_PROVIDER_UNAVAILABLE,
        this.jwks.retryAfterSeconds,
      );
    }
    // A provider pinning a key to one algorithm means it; and an EC key verifies no RS256 token whatever it says.
    if (published.alg !== undefined && published.alg !== algorithm) throw new JsonWebTokenError('invalid algorithm');
    if (keyMismatch(published.key, algorithm) !== undefined) throw new JsonWebTokenError('invalid algorithm');
    return published.key;
  }
}

/** jsonwebtoken's own checks, in its order and with its errors, so both paths answer a token alike. */
function verifyEdDsa(parts: string[], payload: unknown, key: KeyObject, checks: ClaimChecks): unknown {
  if (keyMismatch(key, 'EdDSA') !== undefined) throw new JsonWebTokenError('invalid algorithm');
  let valid = false;
  try {
    valid = verifySignature(null, Buffer.from(`${parts[0]}.${parts[1]}`), key, Buffer.from(parts[2], 'base64url'));
  } catch {
    valid = false;
  }
  if (!valid) throw new JsonWebTokenError('invalid signature');
  // A payload that is not an object passes these checks as it does jsonwebtoken's, and is refused after them.
  const claims = Object(payload) as Record<string, unknown>;
  const now = Math.floor(Date.now() / 1000);
  const tolerance = checks.clockToleranceSeconds;
  if (claims.nbf !== undefined) {
    if (typeof claims.nbf !== 'number') throw new JsonWebTokenError('invalid nbf value');
    if (claims.nbf > now + tolerance) throw new NotBeforeError('jwt not active', new Date(claims.nbf * 1000));
  }
  if (claims.exp !== undefined) {
    if (typeof claims.exp !== 'number') throw new JsonWebTokenError('invalid exp value');
    if (now >= claims.exp + tolerance) throw new TokenExpiredError('jwt expired', new Date(claims.exp * 1000));
  }
  if (checks.audience !== undefined) {
    const targets = Array.isArray(claims.aud) ? (claims.aud as unknown[]) : [claims.aud];
    if (!targets.includes(checks.audience)) {
      throw new JsonWebTokenError(`jwt audience invalid. expected: ${checks.audience}`);
    }
  }
  if (checks.issuer !== undefined && claims.iss !== checks.issuer) {
    throw new JsonWebTokenError(`jwt issuer invalid. expected: ${checks.issuer}`);
  }
  return payload;
}
