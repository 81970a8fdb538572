import { Role, ROLES } from './principal';

export type TokenClaims = Record<string, unknown>;

/**
 * The roles a token grants: the `role` claim when it is a string, plus every
 * string of the `roles` claim when it is an array. Claims of any other type,
 * and role names the broker does not know (matching is exact), grant nothing,
 * so a malformed claim can only ever lead to 403, never to more access.
 */
export function rolesOf(claims: TokenClaims): Role[] {
  const raw: unknown[] = [];
  if (typeof claims.role === 'string') raw.push(claims.role);
  if (Array.isArray(claims.roles)) raw.push(...(claims.roles as unknown[]));
  const known = raw.filter((role): role is Role => typeof role === 'string' && ROLES.includes(role as Role));
  return [...new Set(known)];
}

export function subjectOf(claims: TokenClaims): string | undefined {
  return typeof claims.sub === 'string' ? claims.sub : undefined;
}
