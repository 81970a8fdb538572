import { createPublicKey, createSecretKey, KeyObject } from 'node:crypto';
import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TokenClaims } from './token-claims';

/** Pinning the algorithm refuses `alg: none` and HS tokens presented against an RSA key (algorithm confusion). */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKey: verificationKey(config) as unknown as string,
      algorithms: [config.jwt.algorithm],
      issuer: config.jwt.issuer,
      audience: config.jwt.audience,
      ignoreExpiration: false,
      jsonWebTokenOptions: { clockTolerance: config.jwt.clockToleranceSeconds },
    });
  }

  /** jsonwebtoken accepts a token without `exp` forever; a leaked one could only be revoked by rotating the key. */
  validate(claims: unknown): TokenClaims {
    if (claims === null || typeof claims !== 'object' || Array.isArray(claims)) {
      throw new UnauthorizedException({ error: 'Invalid token: malformed' });
    }
    if (typeof (claims as TokenClaims).exp !== 'number') {
      throw new UnauthorizedException({ error: 'Invalid token: no expiry (exp)' });
    }
    return claims as TokenClaims;
  }
}

/**
 * Given a string, jsonwebtoken tries it as a public key on every verification first: a quarter of the CPU under a
 * flood of authenticated requests. With auth off the placeholder only satisfies passport-jwt's constructor.
 */
function verificationKey({ jwt }: AppConfig): KeyObject {
  if (jwt.algorithm.startsWith('RS') && jwt.publicKey) return createPublicKey(jwt.publicKey);
  return createSecretKey(Buffer.from(jwt.secret ?? 'auth-disabled', 'utf8'));
}
