import { readClaim } from './claim-path';
import { Role, ROLES } from './principal';

export type TokenClaims = Record<string, unknown>;

/**
 * Unknown types and role names grant nothing, so a malformed claim can only lead to 403, never to more access.
 * Without a configured claim, `role` (a string) and `roles` (an array) as ever; a configured one may also be a
 * space- or comma-separated string, as OAuth's `scope` is.
 */
export function rolesOf(claims: TokenClaims, rolesClaim?: string): Role[] {
  const raw: unknown[] = [];
  if (rolesClaim === undefined) {
    if (typeof claims.role === 'string') raw.push(claims.role);
    if (Array.isArray(claims.roles)) raw.push(...(claims.roles as unknown[]));
  } else {
    const value = readClaim(claims, rolesClaim)?.value;
    if (typeof value === 'string') raw.push(...value.split(/[\s,]+/));
    if (Array.isArray(value)) raw.push(...(value as unknown[]));
  }
  const known = raw.filter((role): role is Role => typeof role === 'string' && ROLES.includes(role as Role));
  return [...new Set(known)];
}

export function subjectOf(claims: TokenClaims): string | undefined {
  return typeof claims.sub === 'string' ? claims.sub : undefined;
}
