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

describe('rolesOf with a configured claim', () => {
  it.each([
    [
      'an array at a nested path',
      { realm_access: { roles: ['read-only', 'offline_access'] } },
      'realm_access.roles',
      ['read-only'],
    ],
    ['a space-separated string', { scope: 'openid read-write admin' }, 'scope', ['read-write', 'admin']],
    ['a comma-separated string', { groups: 'write-only, read-only' }, 'groups', ['write-only', 'read-only']],
    [
      'a namespaced claim',
      { 'https://leasehold.example.com/roles': ['admin'] },
      'https://leasehold.example.com/roles',
      ['admin'],
    ],
  ])('reads %s', (_case, claims, path, roles) => {
    expect(rolesOf(claims, path)).toEqual(roles);
  });

  it('reads no other claim: role and roles grant nothing then', () => {
    expect(rolesOf({ role: 'admin', roles: ['admin'] }, 'realm_access.roles')).toEqual([]);
  });

  it.each([
    ['a missing claim', {}],
    ['an object', { realm_access: { roles: { admin: true } } }],
    ['a number', { realm_access: { roles: 7 } }],
    ['differently cased names', { realm_access: { roles: 'Admin READ-ONLY' } }],
  ])('grants nothing for %s', (_case, claims) => {
    expect(rolesOf(claims as Record<string, unknown>, 'realm_access.roles')).toEqual([]);
  });
});

describe('subjectOf', () => {
  it('reads a string sub and ignores any other type', () => {
    expect(subjectOf({ sub: 'worker-1' })).toBe('worker-1');
    expect(subjectOf({ sub: 7 })).toBeUndefined();
    expect(subjectOf({})).toBeUndefined();
  });
});
