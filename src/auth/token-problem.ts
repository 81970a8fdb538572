export const AUTHENTICATION_REQUIRED = 'Authentication required';

/* jsonwebtoken's messages may carry the issuer, audience or key details: only these fixed texts reach a caller. */
const KNOWN_PROBLEMS: ReadonlyArray<[RegExp, string]> = [
  [/^no auth token$/i, AUTHENTICATION_REQUIRED],
  [/^jwt must be provided$/, AUTHENTICATION_REQUIRED],
  [/^invalid signature$/, 'Invalid token: invalid signature'],
  [/^jwt signature is required$/, 'Invalid token: unsigned tokens are not accepted'],
  [/^invalid algorithm$/, 'Invalid token: algorithm not accepted'],
  [/^secretOrPublicKey must be an? (a)?symmetric key/, 'Invalid token: algorithm not accepted'],
  [/^"alg" parameter /, 'Invalid token: algorithm not accepted'],
  [/^(jwt malformed|invalid token|jwt must be a string)$/, 'Invalid token: malformed'],
  [/^invalid (exp|nbf) value$/, 'Invalid token: malformed'],
  [/^no expiry$/, 'Invalid token: no expiry (exp)'],
  [/^jwt issuer invalid/, 'Invalid token: issuer not accepted'],
  [/^jwt audience invalid/, 'Invalid token: audience not accepted'],
];

export function describeTokenProblem(problem: unknown): string {
  if (problem === undefined || problem === null) return AUTHENTICATION_REQUIRED;
  const { name, message } = problem as { name?: unknown; message?: unknown };
  if (name === 'TokenExpiredError') return 'Token expired';
  if (name === 'NotBeforeError') return 'Token not yet valid';
  if (name === 'SigningKeyNotFoundError') return 'Invalid token: unknown signing key';
  if (typeof message !== 'string') return 'Invalid token';
  const known = KNOWN_PROBLEMS.find(([pattern]) => pattern.test(message));
  return known ? known[1] : 'Invalid token';
}
