import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { APP_CONFIG, AppConfig } from '../config/app-config';

export type TokenClaims = Record<string, unknown>;

/**
 * Verifies bearer tokens. The accepted algorithm is pinned to JWT_ALGORITHM,
 * which is what refuses `alg: none` and HS-signed tokens presented against
 * an RSA public key (algorithm confusion).
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    const { jwt } = config;
    const key = jwt.algorithm.startsWith('RS') ? jwt.publicKey : jwt.secret;
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      // When auth is off the guard never calls the strategy; the placeholder
      // only satisfies passport-jwt's constructor.
      secretOrKey: key ?? 'auth-disabled',
      algorithms: [jwt.algorithm],
      issuer: jwt.issuer,
      audience: jwt.audience,
      ignoreExpiration: false,
      jsonWebTokenOptions: { clockTolerance: jwt.clockToleranceSeconds },
    });
  }

  validate(claims: TokenClaims): TokenClaims {
    return claims;
  }
}
