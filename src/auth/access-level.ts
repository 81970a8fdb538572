import { Role, ROLES } from './principal';

export type AccessLevel = 'public' | 'any-role' | 'read-only' | 'write' | 'read-write' | 'admin';

/** Sets, not a ladder: write-only may push but not read, and read-only may read but not push. */
export const ROLES_FOR_LEVEL: Record<Exclude<AccessLevel, 'public'>, readonly Role[]> = {
  'any-role': ROLES,
  'read-only': ['read-only', 'read-write', 'admin'],
  write: ['write-only', 'read-write', 'admin'],
  'read-write': ['read-write', 'admin'],
  admin: ['admin'],
};

/** Who may delete messages nobody has consumed: clearing a queue, and shortening what a queue keeps. */
export const PURGE_LEVEL = 'admin' satisfies AccessLevel;

/** An unknown level opens nothing. */
export function levelAllows(level: AccessLevel, roles: readonly Role[]): boolean {
  if (level === 'public') return true;
  const allowed: readonly Role[] = ROLES_FOR_LEVEL[level] ?? [];
  return roles.some((role) => allowed.includes(role));
}
