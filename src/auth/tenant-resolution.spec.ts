import { HttpException } from '@nestjs/common';
import { parseTenant, resolveTenant, TenantSources } from './tenant-resolution';

const DEFAULT = '00000000-0000-0000-0000-000000000001';
const A = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const B = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91';

function refusal(sources: TenantSources): [number, unknown] | undefined {
  try {
    resolveTenant(sources);
    return undefined;
  } catch (error) {
    return [(error as HttpException).getStatus(), (error as HttpException).getResponse()];
  }
}

describe('resolveTenant', () => {
  it('uses the default tenant when neither a claim nor a header is present', () => {
    expect(resolveTenant({ defaultTenantId: DEFAULT })).toBe(DEFAULT);
  });

  it('uses the token claim when there is no header', () => {
    expect(resolveTenant({ claim: { value: A }, defaultTenantId: DEFAULT })).toBe(A);
  });

  it('uses the header when the token has no claim (a gateway)', () => {
    expect(resolveTenant({ header: B, defaultTenantId: DEFAULT })).toBe(B);
  });

  it('accepts a header that names the same tenant as the claim, in any case', () => {
    expect(resolveTenant({ claim: { value: A }, header: A.toUpperCase(), defaultTenantId: DEFAULT })).toBe(A);
  });

  it('returns the canonical lower-case form', () => {
    expect(resolveTenant({ claim: { value: A.toUpperCase() }, defaultTenantId: DEFAULT })).toBe(A);
  });

  it('refuses a header that disagrees with the claim with 403', () => {
    expect(refusal({ claim: { value: A }, header: B, defaultTenantId: DEFAULT })).toEqual([
      403,
      { error: 'Tenant header does not match token' },
    ]);
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['an object', { id: A }],
    ['an array', [A]],
    ['an empty string', ''],
    ['a name', 'acme'],
    ['a UUID with a trailing character', `${A}0`],
  ])('refuses a claim that is %s with 400 invalid tenant', (_case, value) => {
    expect(refusal({ claim: { value }, defaultTenantId: DEFAULT })).toEqual([400, { error: 'invalid tenant' }]);
  });

  it.each([
    ['empty', ''],
    ['not a UUID', 'acme'],
    ['two values joined by a proxy', `${A}, ${A}`],
  ])('refuses a header that is %s with 400 invalid tenant', (_case, header) => {
    expect(refusal({ header, defaultTenantId: DEFAULT })).toEqual([400, { error: 'invalid tenant' }]);
  });

  it('refuses a malformed header even when the claim is valid', () => {
    expect(refusal({ claim: { value: A }, header: 'acme', defaultTenantId: DEFAULT })).toEqual([
      400,
      { error: 'invalid tenant' },
    ]);
  });
});

describe('parseTenant', () => {
  it('lower-cases a valid UUID', () => {
    expect(parseTenant('0198F2C1-9A7B-7D20-8E31-4C5D6E7F8A90')).toBe(A);
  });
});
