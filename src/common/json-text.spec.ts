import { jsonPath, measureJsonText, minifiedJson } from './json-text';

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

describe('measureJsonText locating a member', () => {
  const located = (text: string) => {
    const members = measureJsonText(text, Infinity, Infinity, 'payload').members ?? new Map();
    return Object.fromEntries([...members].map(([path, span]) => [path, text.slice(span.start, span.end)]));
  };

  it('notes each value by the path of its object, whatever its type, with the whitespace around it left out', () => {
    const text = `{ "items" : [
      {"queue":"q","payload" : {"b":1,"a":[1, 2]} , "traceId":"t"},
      {"payload":12345678901234567890123},
      {"payload":"a string"},
      {"payload":null}, {"queue":"no payload"},
      {"payload":
        1e400
      }
    ] }`;

    expect(located(text)).toEqual({
      '."items"[0]': '{"b":1,"a":[1, 2]}',
      '."items"[1]': '12345678901234567890123',
      '."items"[2]': '"a string"',
      '."items"[3]': 'null',
      '."items"[5]': '1e400',
    });
  });

  it('keeps the last of a repeated key, as JSON.parse does, at every level', () => {
    const text = '{"items":[{"payload":1,"payload":2}],"items":[{"payload":3},{"payload":4,"x":0,"payload":5}]}';

    expect(located(text)).toEqual({ '."items"[0]': '3', '."items"[1]': '5' });
    expect(JSON.parse(text)).toEqual({ items: [{ payload: 3 }, { payload: 5, x: 0 }] });
  });

  it('is not misled by braces, brackets, commas, quotes and the name itself inside strings', () => {
    const text =
      '{"items":[{"queue":"{[,\\"payload\\":]}","payload":{"s":"}],\\"payload\\":\\\\","payload":"x"}},{"payload":0}]}';

    expect(located(text)).toEqual({
      '."items"[0]': '{"s":"}],\\"payload\\":\\\\","payload":"x"}',
      '."items"[1]': '0',
    });
  });

  it('does not look inside a located value, and reads keys spelt with escapes as JSON.parse does', () => {
    const text =
      '{"it\\u0065ms":[{"pay\\u006coad":{"payload":{"payload":1}}}],"operations":[{"items":[{"payload":2}]}]}';

    expect(located(text)).toEqual({
      '."items"[0]': '{"payload":{"payload":1}}',
      '."operations"[0]."items"[0]': '2',
    });
    expect(jsonPath('operations', 0, 'items', 0)).toBe('."operations"[0]."items"[0]');
  });

  it('tells a value with whitespace outside its strings from one without', () => {
    const spans = measureJsonText(
      '{"items":[{"payload" : {"a":"b c"} },{"payload":{"a": 1}}]}',
      Infinity,
      Infinity,
      'payload',
    ).members!;

    expect(spans.get('."items"[0]')!.spaced).toBe(false);
    expect(spans.get('."items"[1]')!.spaced).toBe(true);
  });

  it('notes nothing in a text without the member, and leaves members undefined when none was asked for', () => {
    expect(measureJsonText('{"items":[{"queue":"q"}]}', Infinity, Infinity, 'payload').members).toEqual(new Map());
    expect(measureJsonText('{"items":[{"payload":1}]}').members).toBeUndefined();
  });

  it('finds every payload of random bodies, the one JSON.parse keeps, minified to the text as written', () => {
    let seed = 7;
    // mulberry32: a fixed sequence, so a failure repeats.
    const random = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const pick = <T>(choices: T[]) => choices[random(choices.length)];
    const space = () => pick([' ', '\n', '\t ', '\r\n  ', '', '', '']);
    const SCALARS = ['0', '-0', '-1.5e+3', '1.50', '1e400', '12345678901234567890123', 'true', 'null'];
    const STRINGS = ['"a \\" b"', '"{[,]}"', '"\\u00e9\\n"', '"payload"', '"ends \\\\"', '"sp  ace"'];
    /** [as sent, minified] */
    const value = (depth: number): [string, string] => {
      const kind = depth > 3 ? 0 : random(3);
      if (kind === 0) {
        const scalar = pick([...SCALARS, ...STRINGS]);
        return [scalar, scalar];
      }
      const parts = Array.from({ length: random(4) }, () => {
        const [sent, minified] = value(depth + 1);
        if (kind === 1) return [`${space()}${sent}${space()}`, minified];
        const key = pick(['"k"', '"payload"', '"items"', '"b"', '"a"', '"pay\\u006coad"']);
        return [`${space()}${key}${space()}:${space()}${sent}${space()}`, `${key}:${minified}`];
      });
      const [open, close] = kind === 1 ? ['[', ']'] : ['{', '}'];
      return [
        `${open}${parts.map(([sent]) => sent).join(',')}${space()}${close}`,
        `${open}${parts.map(([, minified]) => minified).join(',')}${close}`,
      ];
    };
    let checked = 0;
    for (let round = 0; round < 300; round += 1) {
      const expected: Array<string | undefined> = [];
      const items = Array.from({ length: random(5) }, () => {
        const members = [`"queue":${space()}"q"`];
        let last: string | undefined;
        for (let n = random(3); n > 0; n -= 1) {
          const [sent, minified] = value(0);
          members.push(`${space()}${pick(['"payload"', '"pay\\u006coad"'])}${space()}:${space()}${sent}${space()}`);
          last = minified;
        }
        expected.push(last);
        return `{${members.join(',')}}`;
      });
      const text = `{${space()}"items"${space()}:${space()}[${items.join(`,${space()}`)}]${space()}}`;
      const parsed = JSON.parse(text) as { items: Array<{ payload?: unknown }> };
      const spans = measureJsonText(text, Infinity, Infinity, 'payload').members!;

      parsed.items.forEach((item, index) => {
        const span = spans.get(jsonPath('items', index));
        expect(span === undefined).toBe(expected[index] === undefined);
        if (span === undefined) return;
        const minified = minifiedJson(text, span);
        expect(minified).toBe(expected[index]);
        expect(JSON.parse(minified)).toEqual(item.payload);
        checked += 1;
      });
    }
    expect(checked).toBeGreaterThan(300);
  });
});

describe('minifiedJson', () => {
  it.each([
    ['{ "a" : 1 ,\n "b" : [ 1 , 2 ] }', '{"a":1,"b":[1,2]}'],
    ['[ "a b" , "  " ]', '["a b","  "]'],
    ['{"q": "say \\"hi there\\" { [ , } "}', '{"q":"say \\"hi there\\" { [ , } "}'],
    ['[ "ends in a backslash \\\\" , 1 ]', '["ends in a backslash \\\\",1]'],
    ['\t[\r\n1e400 ,\t-0, 1.50 , 12345678901234567890123 ]\n', '[1e400,-0,1.50,12345678901234567890123]'],
    ['{"b": 1, "a": 2, "b": 3}', '{"b":1,"a":2,"b":3}'],
    ['"\\u00e9\\n \\t"', '"\\u00e9\\n \\t"'],
  ])('minifies %j to %j, strings and numbers as written', (text, minified) => {
    expect(minifiedJson(text)).toBe(minified);
  });

  it('hands back a span without whitespace as it is', () => {
    const text = '{"payload":{"a":[1,"b c"]}}';

    expect(minifiedJson(text, { start: 11, end: text.length - 1, spaced: false })).toBe('{"a":[1,"b c"]}');
  });
});
