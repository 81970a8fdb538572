import { Role, ROLES } from './principal';

export type TokenClaims = Record<string, unknown>;

/** Unknown types and role names grant nothing, so a malformed claim can only lead to 403, never to more access. */
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
