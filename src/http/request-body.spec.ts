import { isStorableBody, parseJsonBody, sentPayloads } from './request-body';

const LIMITS = { limit: 1 << 20, maxInflateRatio: 100, maxJsonElements: 100_000, maxJsonDepth: 200 };
const parse = (text: string) => parseJsonBody(Buffer.from(text), LIMITS) as object;
const nested = (depth: number) => `{"items":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;

describe('isStorableBody', () => {
  it('holds for a body whose every value PostgreSQL can decode', () => {
    expect(isStorableBody(parse('{"items":[{"payload":{"text":"ünï ✓ 😀 \\ud83d\\ude00","n":[1,null]}}]}'))).toBe(true);
    expect(isStorableBody(parse(nested(100)))).toBe(true);
  });

  it.each([
    ['an escaped NUL', '{"items":[{"payload":"a\\u0000b"}]}'],
    ['half a surrogate pair', '{"items":[{"payload":"\\ud83d"}]}'],
    ['nesting past the depth a payload may have', nested(101)],
  ])('does not hold for a body with %s anywhere', (_what, text) => {
    expect(isStorableBody(parse(text))).toBe(false);
  });

  it('does not hold for an object it did not parse', () => {
    expect(isStorableBody({ items: [] })).toBe(false);
  });
});

describe('sentPayloads', () => {
  it("gives each item's payload as it was written, minified, keyed by the item JSON.parse made", () => {
    const body = parse(
      '{"items":[{"queue":"q","payload": {"b":1, "a":[1e400, 12345678901234567890123]} },' +
        '{"queue":"q"},{"queue":"q","payload":null},{"payload":"x","payload":{"f": 1.50}}]}',
    ) as { items: object[] };

    const sent = sentPayloads(body, ['items']);

    expect([...sent.keys()]).toEqual([body.items[0], body.items[2], body.items[3]]);
    expect([...sent.values()]).toEqual(['{"b":1,"a":[1e400,12345678901234567890123]}', 'null', '{"f":1.50}']);
  });

  it("finds a transaction's push items by their operation", () => {
    const body = parse('{"operations":[{"type":"ack"},{"type":"push","items":[{"payload":{"x": -0}}]}]}') as {
      operations: Array<{ items: object[] }>;
    };

    expect(sentPayloads(body, ['operations', 0, 'items']).size).toBe(0);
    expect([...sentPayloads(body, ['operations', 1, 'items'])]).toEqual([[body.operations[1].items[0], '{"x":-0}']]);
  });

  it('gives nothing for a body it did not parse, nor where the path holds no array', () => {
    expect(sentPayloads({ items: [{ payload: 1 }] }, ['items']).size).toBe(0);
    expect(sentPayloads(parse('{"items":{"payload":1}}'), ['items']).size).toBe(0);
    expect(sentPayloads(parse('{"items":[{"payload":1}]}'), ['operations', 0, 'items']).size).toBe(0);
  });
});
