import { AccessLevel, levelAllows } from './access-level';
import { Role, ROLES } from './principal';

describe('levelAllows', () => {
  // The contract's table: levels are sets, not a ladder.
  const expected: Record<AccessLevel, Role[]> = {
    public: [...ROLES],
    'any-role': [...ROLES],
    'read-only': ['read-only', 'read-write', 'admin'],
    write: ['write-only', 'read-write', 'admin'],
    'read-write': ['read-write', 'admin'],
    admin: ['admin'],
  };

  for (const [level, allowed] of Object.entries(expected) as Array<[AccessLevel, Role[]]>) {
    it.each(ROLES.map((role) => [role, allowed.includes(role)]))(
      `level ${level}: role %s allowed = %p`,
      (role, isAllowed) => {
        expect(levelAllows(level, [role])).toBe(isAllowed);
      },
    );
  }

  it('does not let read-only push nor write-only read', () => {
    expect(levelAllows('write', ['read-only'])).toBe(false);
    expect(levelAllows('read-only', ['write-only'])).toBe(false);
    expect(levelAllows('read-write', ['read-only', 'write-only'])).toBe(false);
  });

  it('allows when any one of several roles is enough', () => {
    expect(levelAllows('admin', ['read-only', 'admin'])).toBe(true);
  });

  it('allows nothing but public routes to a caller without roles', () => {
    expect(levelAllows('public', [])).toBe(true);
    expect(levelAllows('any-role', [])).toBe(false);
    expect(levelAllows('read-only', [])).toBe(false);
  });

  it('fails closed for a level it does not know', () => {
    expect(levelAllows('superuser' as AccessLevel, ['admin'])).toBe(false);
  });
});
