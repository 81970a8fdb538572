import { rolesOf, subjectOf } from './token-claims';

describe('rolesOf', () => {
  it.each([
    ['a role string', { role: 'read-write' }, ['read-write']],
    ['a roles array', { roles: ['read-only', 'write-only'] }, ['read-only', 'write-only']],
    ['both claims, merged without repeats', { role: 'admin', roles: ['admin', 'read-only'] }, ['admin', 'read-only']],
  ])('reads %s', (_case, claims, roles) => {
    expect(rolesOf(claims)).toEqual(roles);
  });

  it.each([
    ['no role claims', {}],
    ['roles as a string', { roles: 'admin' }],
    ['role as an array', { role: ['admin'] }],
    ['roles as an object', { roles: { admin: true } }],
    ['a number', { role: 1 }],
    ['non-string entries', { roles: [1, null, { role: 'admin' }, ['admin']] }],
    ['unknown names', { roles: ['superuser', 'write'] }],
    ['a differently cased name', { role: 'Admin' }],
    ['a padded name', { role: ' admin ' }],
  ])('grants nothing for %s', (_case, claims) => {
    expect(rolesOf(claims as Record<string, unknown>)).toEqual([]);
  });

  it('keeps the known roles of an array that also holds junk', () => {
    expect(rolesOf({ roles: ['superuser', 42, 'read-only'] })).toEqual(['read-only']);
  });
});

describe('subjectOf', () => {
  it('reads a string sub and ignores any other type', () => {
    expect(subjectOf({ sub: 'worker-1' })).toBe('worker-1');
    expect(subjectOf({ sub: 7 })).toBeUndefined();
    expect(subjectOf({})).toBeUndefined();
  });
});
