import { JsonWebTokenError, NotBeforeError, TokenExpiredError } from 'jsonwebtoken';
import { SigningKeyNotFoundError } from './jwks-key-set';
import { describeTokenProblem } from './token-problem';

describe('describeTokenProblem', () => {
  it.each([
    ['no token at all', undefined, 'Authentication required'],
    ["passport-jwt's missing token", new Error('No auth token'), 'Authentication required'],
    ['an expired token', new TokenExpiredError('jwt expired', new Date()), 'Token expired'],
    ['a token not yet valid', new NotBeforeError('jwt not active', new Date()), 'Token not yet valid'],
    ['a bad signature', new JsonWebTokenError('invalid signature'), 'Invalid token: invalid signature'],
    ['alg none', new JsonWebTokenError('jwt signature is required'), 'Invalid token: unsigned tokens are not accepted'],
    ['another algorithm', new JsonWebTokenError('invalid algorithm'), 'Invalid token: algorithm not accepted'],
    [
      'an HS token against an RSA key',
      new JsonWebTokenError('secretOrPublicKey must be a symmetric key when using HS256'),
      'Invalid token: algorithm not accepted',
    ],
    ['garbage', new JsonWebTokenError('jwt malformed'), 'Invalid token: malformed'],
    ['an undecodable token', new JsonWebTokenError('invalid token'), 'Invalid token: malformed'],
    ['a non-numeric exp', new JsonWebTokenError('invalid exp value'), 'Invalid token: malformed'],
    [
      'an EC key of another curve',
      new Error('"alg" parameter "ES256" requires curve "prime256v1".'),
      'Invalid token: algorithm not accepted',
    ],
    ['no exp', new JsonWebTokenError('no expiry'), 'Invalid token: no expiry (exp)'],
    ["a kid not in the provider's key set", new SigningKeyNotFoundError('x'), 'Invalid token: unknown signing key'],
  ])('describes %s', (_case, problem, text) => {
    expect(describeTokenProblem(problem)).toBe(text);
  });

  it('says the issuer is wrong without disclosing the configured one', () => {
    const text = describeTokenProblem(new JsonWebTokenError('jwt issuer invalid. expected: https://idp.internal'));

    expect(text).toBe('Invalid token: issuer not accepted');
  });

  it('says the audience is wrong without disclosing the configured one', () => {
    const text = describeTokenProblem(new JsonWebTokenError('jwt audience invalid. expected: leasehold-prod or x'));

    expect(text).toBe('Invalid token: audience not accepted');
  });

  it.each([
    ['a key-size complaint', new Error('secretOrPublicKey has a minimum key size of 2048 bits for RS256')],
    ['a crypto error', new Error('error:1E08010C:DECODER routines::unsupported')],
    ['a non-error', 'boom'],
  ])('answers a bare "Invalid token" for %s', (_case, problem) => {
    expect(describeTokenProblem(problem)).toBe('Invalid token');
  });
});
