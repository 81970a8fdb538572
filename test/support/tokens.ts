import { sign, SignOptions } from 'jsonwebtoken';

export const TEST_JWT_SECRET = 'leasehold-test-secret-with-enough-entropy';

export function hsToken(claims: Record<string, unknown>, options: SignOptions = {}, secret = TEST_JWT_SECRET): string {
  return sign(claims, secret, { algorithm: 'HS256', expiresIn: '5m', ...options });
}
