import { isStorableBody, parseJsonBody } from './request-body';

const LIMITS = { limit: 1 << 20, maxInflateRatio: 100, maxJsonElements: 100_000, maxJsonDepth: 200 };
const parse = (text: string) => parseJsonBody(Buffer.from(text), LIMITS) as object;
const nested = (depth: number) => `{"items":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;

describe('isStorableBody', () => {
  it('holds for a body whose every value jsonb can store', () => {
    expect(isStorableBody(parse('{"items":[{"payload":{"text":"ünï ✓ 😀 \\ud83d\\ude00","n":[1,null]}}]}'))).toBe(true);
    expect(isStorableBody(parse(nested(100)))).toBe(true);
  });

  it.each([
    ['an escaped NUL', '{"items":[{"payload":"a\\u0000b"}]}'],
    ['half a surrogate pair', '{"items":[{"payload":"\\ud83d"}]}'],
    ['nesting past the depth jsonb keeps', nested(101)],
  ])('does not hold for a body with %s anywhere', (_what, text) => {
    expect(isStorableBody(parse(text))).toBe(false);
  });

  it('does not hold for an object it did not parse', () => {
    expect(isStorableBody({ items: [] })).toBe(false);
  });
});
