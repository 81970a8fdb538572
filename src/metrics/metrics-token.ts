import { timingSafeEqual } from 'node:crypto';

/** Whether an Authorization header carries `token` as its bearer token, compared in constant time. */
export function bearerMatches(authorization: string | undefined, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '');
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
