import { randomFillSync } from 'node:crypto';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for any RFC 4122/9562 textual UUID; used to keep non-UUIDs away from `uuid` casts. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}

/** Random bytes drawn 4 KB at a time: a draw per id cost a push of 100 items a tenth of its CPU. */
const POOL_BYTES = 4096;
const RANDOM_BYTES_PER_ID = 10;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let drawn = POOL_BYTES;
const HEX = Array.from({ length: 256 }, (_unused, byte) => byte.toString(16).padStart(2, '0'));

/**
 * UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then 74 random bits. Ids sort
 * by creation time, which keeps B-tree inserts on the right-hand edge.
 */
export function uuidv7(now: number = Date.now()): string {
  if (drawn + RANDOM_BYTES_PER_ID > POOL_BYTES) {
    randomFillSync(pool);
    drawn = 0;
  }
  const r = drawn;
  drawn += RANDOM_BYTES_PER_ID;
  const high = Math.floor(now / 0x10000);
  const low = now % 0x10000;
  return (
    HEX[(high >>> 24) & 0xff] +
    HEX[(high >>> 16) & 0xff] +
    HEX[(high >>> 8) & 0xff] +
    HEX[high & 0xff] +
    '-' +
    HEX[low >>> 8] +
    HEX[low & 0xff] +
    '-' +
    HEX[0x70 | (pool[r] & 0x0f)] +
    HEX[pool[r + 1]] +
    '-' +
    HEX[0x80 | (pool[r + 2] & 0x3f)] +
    HEX[pool[r + 3]] +
    '-' +
    HEX[pool[r + 4]] +
    HEX[pool[r + 5]] +
    HEX[pool[r + 6]] +
    HEX[pool[r + 7]] +
    HEX[pool[r + 8]] +
    HEX[pool[r + 9]]
  );
}
