import { readClaim } from './claim-path';

describe('readClaim', () => {
  it.each([
    ['a top-level claim', { tenant: 't' }, 'tenant', 't'],
    ['a nested claim by a dotted path', { org: { id: 'o' } }, 'org.id', 'o'],
    [
      'a deeper path',
      { resource_access: { leasehold: { roles: ['admin'] } } },
      'resource_access.leasehold.roles',
      ['admin'],
    ],
    [
      'a namespaced name holding dots, as it stands',
      { 'https://example.com/tenant': 'n' },
      'https://example.com/tenant',
      'n',
    ],
    ['a name with dots under a nested object', { claims: { 'a.b': 'x' } }, 'claims.a.b', 'x'],
    ['a claim that is present but null', { tenant: null }, 'tenant', null],
  ])('reads %s', (_case, claims, path, value) => {
    expect(readClaim(claims as Record<string, unknown>, path)).toEqual({ value });
  });

  it.each([
    ['a missing claim', {}, 'tenant'],
    ['a missing nested claim', { org: { name: 'o' } }, 'org.id'],
    ['a path through a string', { org: 'o' }, 'org.id'],
    ['a path through an array', { org: [{ id: 'o' }] }, 'org.0.id'],
    ['a path through null', { org: null }, 'org.id'],
    ['an inherited property', {}, 'constructor'],
  ])('finds nothing for %s', (_case, claims, path) => {
    expect(readClaim(claims as Record<string, unknown>, path)).toBeUndefined();
  });
});
