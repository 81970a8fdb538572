import { isUuid, uuidv7 } from './uuid';

describe('uuidv7', () => {
  it('produces RFC 9562 version 7 ids with the variant bits set', () => {
    const id = uuidv7();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('encodes the millisecond timestamp in the first 48 bits so ids sort by time', () => {
    const earlier = uuidv7(1_700_000_000_000);
    const later = uuidv7(1_700_000_000_001);
    expect(parseInt(earlier.replace(/-/g, '').slice(0, 12), 16)).toBe(1_700_000_000_000);
    expect(earlier < later).toBe(true);
  });

  it('does not repeat', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => uuidv7(1)));
    expect(ids.size).toBe(1000);
  });
});

describe('isUuid', () => {
  it.each(['0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90', '0198F2C1-9A7B-7D20-8E31-4C5D6E7F8A90'])('accepts %s', (value) => {
    expect(isUuid(value)).toBe(true);
  });

  it.each(['', 'not-a-uuid', '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a9', '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a900', 42, null])(
    'rejects %p',
    (value) => {
      expect(isUuid(value)).toBe(false);
    },
  );
});
