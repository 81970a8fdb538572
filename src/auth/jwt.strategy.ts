import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import passport from 'passport';
import { ExtractJwt } from 'passport-jwt';
import { TokenClaims } from './token-claims';
import { TokenVerifier } from './token-verifier';

type VerifyToken = (token: string, done: (error: unknown, claims?: TokenClaims | null) => void) => void;

const bearerToken = ExtractJwt.fromAuthHeaderAsBearerToken();

/** passport-jwt's extraction with TokenVerifier's checks: passport-jwt verifies with jsonwebtoken, which lacks EdDSA. */
class BearerTokenStrategy extends passport.Strategy {
  constructor(private readonly verifyToken: VerifyToken) {
    super();
  }

  override authenticate(request: Request): void {
    const token = bearerToken(request);
    if (!token) {
      this.fail(new Error('No auth token'));
      return;
    }
    this.verifyToken(token, (error, claims) => {
      if (error) this.error(error);
      else if (claims) this.success(claims);
      else this.fail(401);
    });
  }
}

@Injectable()
export class JwtStrategy extends PassportStrategy(BearerTokenStrategy, 'jwt') {
  constructor(private readonly verifier: TokenVerifier) {
    super();
  }

  validate(token: string): Promise<TokenClaims> {
    return this.verifier.verify(token);
  }
}
