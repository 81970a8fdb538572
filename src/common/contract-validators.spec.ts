import {
  IsIntegerBetween,
  IsName,
  IsOptionalText,
  IsStoredJson,
  IsTrueOrFalse,
  IsUuidText,
  isTooLargeMessage,
  queryBoolean,
  queryInteger,
  storedJsonOf,
  withValidationLimits,
  zonedTimestamp,
} from './contract-validators';
import { firstMessage, instantiate } from './dto-validation';

class NamesDto {
  @IsName()
  queue: unknown;

  @IsName({ optional: true })
  partition: unknown;

  @IsName({ optional: true, inQuery: true })
  group: unknown;
}

class ScalarsDto {
  @IsUuidText()
  partitionId: unknown = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

  @IsUuidText({ optional: true })
  leaseId: unknown;

  @IsIntegerBetween(1, 10)
  batch: unknown;

  @IsIntegerBetween(1, 10, { nullMeansAbsent: true })
  epoch: unknown;

  @IsTrueOrFalse()
  flag: unknown;

  @IsOptionalText()
  note: unknown;
}

class PayloadDto {
  @IsStoredJson({ maxBytes: 'messageMaxBytes' })
  payload: unknown;
}

const messageOf = <T extends object>(type: new () => T, plain: Record<string, unknown>): string | undefined =>
  withValidationLimits({ messageMaxBytes: 32 }, () => firstMessage(instantiate(type, plain)));

describe('contract validators', () => {
  describe('IsName', () => {
    it.each([
      [{}, 'queue is required'],
      [{ queue: null }, 'queue is required'],
      [{ queue: 7 }, 'queue must be a string'],
      [{ queue: '' }, 'queue must be 1 to 255 characters long'],
      [{ queue: 'q'.repeat(256) }, 'queue must be 1 to 255 characters long'],
      [{ queue: 'a\u007fb' }, 'queue must not contain control characters'],
      [{ queue: 'a\ud800' }, 'queue must not contain an unpaired UTF-16 surrogate'],
      [{ queue: 'q', partition: '' }, 'partition must be 1 to 255 characters long'],
      [{ queue: 'q', group: ['a', 'b'] }, 'group must be given once'],
      [{ queue: 'q', partition: ['a'] }, 'partition must be a string'],
    ])('refuses %p with %p', (plain, message) => {
      expect(messageOf(NamesDto, plain)).toBe(message);
    });

    it('accepts 255 characters, a surrogate pair, and null for an optional name', () => {
      expect(messageOf(NamesDto, { queue: 'q'.repeat(255), partition: null })).toBeUndefined();
      expect(messageOf(NamesDto, { queue: 'emoji \ud83d\ude00' })).toBeUndefined();
    });
  });

  describe('scalars', () => {
    it.each([
      [{ partitionId: null }, 'partitionId is required'],
      [{ partitionId: 'not-a-uuid' }, 'partitionId must be a UUID'],
      [{ leaseId: 42 }, 'leaseId must be a UUID'],
      [{ batch: 0 }, 'batch must be an integer between 1 and 10'],
      [{ batch: 1.5 }, 'batch must be an integer between 1 and 10'],
      [{ batch: '2' }, 'batch must be an integer between 1 and 10'],
      [{ batch: null }, 'batch must be an integer between 1 and 10'],
      [{ batch: NaN }, 'batch must be an integer between 1 and 10'],
      [{ epoch: 11 }, 'epoch must be an integer between 1 and 10'],
      [{ flag: 'yes' }, 'flag must be true or false'],
      [{ note: { message: 'x' } }, 'note must be a string'],
    ])('refuses %p with %p', (plain, message) => {
      expect(messageOf(ScalarsDto, plain)).toBe(message);
    });

    it('accepts an upper-case UUID, a null epoch, null text and absent values', () => {
      expect(
        messageOf(ScalarsDto, {
          leaseId: '0198F2C1-9A7B-7D20-8E31-4C5D6E7F8A90',
          epoch: null,
          note: null,
          batch: 10,
          flag: false,
        }),
      ).toBeUndefined();
    });

    it('reports the first problem in field order', () => {
      expect(messageOf(ScalarsDto, { note: 1, flag: 'x', leaseId: 'x' })).toBe('leaseId must be a UUID');
    });
  });

  describe('IsStoredJson', () => {
    it.each([
      [{}, 'payload is required (null is allowed)'],
      [{ payload: { text: 'a\u0000b' } }, 'payload must not contain the character \\u0000'],
      [{ payload: { 'a\udc00': 1 } }, 'payload must not contain an unpaired UTF-16 surrogate'],
      [
        { payload: JSON.parse('['.repeat(101) + ']'.repeat(101)) as unknown },
        'payload is nested more than 100 levels deep',
      ],
      [{ payload: 'x'.repeat(31) }, 'payload is larger than 32 bytes (33)'],
    ])('refuses %p with %p', (plain, message) => {
      expect(messageOf(PayloadDto, plain)).toBe(message);
    });

    it('marks only the size problem as a 413', () => {
      expect(isTooLargeMessage('items[1].payload is larger than 32 bytes (33)')).toBe(true);
      expect(isTooLargeMessage('options are larger than 65536 bytes (70000)')).toBe(true);
      expect(isTooLargeMessage('items[1].payload is nested more than 100 levels deep')).toBe(false);
    });

    it('accepts null and keeps the JSON text it measured', () => {
      const dto = instantiate(PayloadDto, { payload: { a: [1, 'two'] } });
      const nullDto = instantiate(PayloadDto, { payload: null });

      const storedJson = new Map<object, string>();

      expect(withValidationLimits({ messageMaxBytes: 32, storedJson }, () => firstMessage(dto))).toBeUndefined();
      expect(storedJson.get(dto)).toBe('{"a":[1,"two"]}');
      expect(storedJsonOf(dto, 'payload', storedJson)).toBe('{"a":[1,"two"]}');
      expect(messageOf(PayloadDto, { payload: null })).toBeUndefined();
      expect(storedJsonOf(nullDto, 'payload', storedJson)).toBe('null');
    });

    it('refuses to run without the size limit in force', () => {
      expect(() => firstMessage(instantiate(PayloadDto, { payload: 1 }))).toThrow(/messageMaxBytes is not in force/);
    });
  });

  describe('query-string conversions', () => {
    it.each([
      ['12', 12],
      ['-0', -0],
      ['1.5', NaN],
      ['1e3', NaN],
      [' 1', NaN],
      ['', NaN],
      [['1', '2'], NaN],
      [undefined, undefined],
    ])('reads the integer %p as %p', (value, expected) => {
      expect(queryInteger(value)).toBe(expected);
    });

    it.each([
      ['true', true],
      ['1', true],
      ['false', false],
      ['0', false],
      ['yes', 'yes'],
    ])('reads the boolean %p as %p', (value, expected) => {
      expect(queryBoolean(value)).toBe(expected);
    });

    it.each([
      ['2026-07-30', '2026-07-30T00:00:00Z'],
      ['2026-07-30T11:06:44.512873', '2026-07-30T11:06:44.512873Z'],
      ['2026-07-30T11:06:44+02:00', '2026-07-30T11:06:44+02:00'],
      ['2026-02-30T00:00:00Z', undefined],
      ['2026-01-01T25:00:00Z', undefined],
      ['2026-07-30T11:06:44+16:00', undefined],
      ['yesterday', undefined],
    ])('reads the timestamp %p as %p', (value, expected) => {
      expect(zonedTimestamp(value)).toBe(expected);
    });
  });
});
