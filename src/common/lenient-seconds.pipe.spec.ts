import { AppConfig } from '../config/app-config';
import { LenientSecondsPipe } from './lenient-seconds.pipe';

describe('LenientSecondsPipe', () => {
  const pipe = new LenientSecondsPipe({
    bodyLimitBytes: 1024,
    limits: { bodyMaxInflateRatio: 10, bodyMaxJsonValues: 20 },
    http: { bodyMinBytesPerSecond: 0, bodyMinRateGraceMs: 5_000 },
  } as AppConfig);
  const raw = (text: string) => Buffer.from(text, 'utf8');

  it.each([
    ['a raw JSON body', raw('{"seconds":120}'), 120],
    ['a parsed object', { seconds: 45 }, 45],
    ['a string body', '{"seconds":7}', 7],
    ['the int32 maximum', raw('{"seconds":2147483647}'), 2147483647],
    ['a body with a byte-order mark', raw('\uFEFF{"seconds":90}'), 90],
  ])('reads %s', (_case, body, expected) => {
    expect(pipe.transform(body)).toBe(expected);
  });

  it.each([
    ['undefined', undefined],
    ['an empty buffer', raw('')],
    ['non-JSON', raw('hello')],
    ['truncated JSON', raw('{"seconds":')],
    ['JSON null', raw('null')],
    ['a JSON number', raw('120')],
    ['an array', raw('[{"seconds":120}]')],
    ['a missing key', raw('{}')],
    ['a string value', raw('{"seconds":"120"}')],
    ['a fraction', raw('{"seconds":2.5}')],
    ['null', raw('{"seconds":null}')],
    ['a boolean', raw('{"seconds":false}')],
    ['1e12', raw('{"seconds":1e12}')],
    ['one past int32', raw('{"seconds":2147483648}')],
    ['one below int32', raw('{"seconds":-2147483649}')],
    ['an empty parsed object', {}],
    ['more JSON elements than BODY_MAX_JSON_VALUES', raw(`{"seconds":120,"x":[${'0,'.repeat(30)}0]}`)],
    ['JSON nested deeper than any body may be', raw(`{"seconds":120,"x":${'['.repeat(120)}${']'.repeat(120)}}`)],
  ])('falls back to 60 for %s', (_case, body) => {
    expect(pipe.transform(body)).toBe(60);
  });

  it.each([0, -1, -2147483648])('clamps %p to 1', (seconds) => {
    expect(pipe.transform(raw(JSON.stringify({ seconds })))).toBe(1);
  });
});
