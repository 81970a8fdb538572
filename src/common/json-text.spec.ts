import { measureJsonText } from './json-text';

describe('measureJsonText', () => {
  it.each<[string, number, number]>([
    ['1', 0, 0],
    ['[]', 1, 1],
    ['{}', 1, 1],
    ['[1, 2, 3]', 4, 1],
    ['{"a": 1, "b": [true, null]}', 6, 2],
    ['[{}, {}, {}]', 7, 2],
    ['[[[[]]]]', 7, 4],
  ])('counts the containers and the items of %s', (text, elements, depth) => {
    expect(measureJsonText(text)).toMatchObject({ elements, depth });
  });

  it('does not count brackets, braces and commas inside strings, escaped quotes included', () => {
    expect(measureJsonText('["[{,}]", "a\\"[,"]')).toMatchObject({ elements: 3, depth: 1 });
  });

  it('stops counting once a bound is passed, so a huge body costs no more than the bound', () => {
    const huge = `[${'{},'.repeat(1_000_000)}{}]`;

    expect(measureJsonText(huge, 100).elements).toBe(101);
    expect(measureJsonText('['.repeat(10_000), Infinity, 50).depth).toBe(51);
  });

  it.each([
    ['\\u0000 in a value', '{"a": "x\\u0000"}', { nul: true, loneSurrogate: false }],
    ['\\u0000 in a key', '{"\\u0000": 1}', { nul: true, loneSurrogate: false }],
    ['a high surrogate alone', '["\\ud800"]', { nul: false, loneSurrogate: true }],
    ['a low surrogate alone', '["\\udc00x"]', { nul: false, loneSurrogate: true }],
    ['a high surrogate before a non-surrogate escape', '["\\ud800\\u0041"]', { nul: false, loneSurrogate: true }],
    ['an escaped pair', '["\\ud83d\\ude00"]', { nul: false, loneSurrogate: false }],
    ['a literal backslash before u0000', '["\\\\u0000"]', { nul: false, loneSurrogate: false }],
  ])('notices %s', (_case, text, flags) => {
    expect(measureJsonText(text)).toMatchObject(flags);
  });

  it('reads what JSON.stringify writes for the values PostgreSQL cannot store', () => {
    expect(measureJsonText(JSON.stringify({ a: 'x\u0000' })).nul).toBe(true);
    expect(measureJsonText(JSON.stringify(['\ud800'])).loneSurrogate).toBe(true);
    expect(measureJsonText(JSON.stringify(['😀'])).loneSurrogate).toBe(false);
  });
});
