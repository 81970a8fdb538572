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

  it('encodes the largest 48-bit timestamp', () => {
    expect(uuidv7(2 ** 48 - 1).slice(0, 13)).toBe('ffffffff-ffff');
  });

  it('does not repeat, across refills of its random pool', () => {
    const ids = Array.from({ length: 5000 }, () => uuidv7(1));
    expect(new Set(ids).size).toBe(5000);
    for (const id of ids) expect(id).toMatch(/^00000000-0001-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('draws its random bits evenly', () => {
    const counts = new Array<number>(16).fill(0);
    for (let index = 0; index < 4000; index += 1) {
      for (const digit of uuidv7().slice(24)) counts[parseInt(digit, 16)] += 1;
    }
    // 48,000 digits: each of the 16 values is expected 3,000 times.
    for (const count of counts) expect(count).toBeGreaterThan(2600);
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
