import { AppConfig } from '../config/app-config';
import { parseEncryptionKeys, QUEEN_KEY_ID } from './encryption-keys';
import { startupProblem } from './encryption-startup-check';
import { PayloadCipher, UnreadablePayloadError } from './payload-cipher';

const HEX_1 = 'a1'.repeat(32);
const HEX_2 = 'b2'.repeat(32);

function cipherWith(keys: string | undefined, queenKey?: string): PayloadCipher {
  const problems: string[] = [];
  const encryptionKeys = parseEncryptionKeys(keys, queenKey, problems);
  expect(problems).toEqual([]);
  return new PayloadCipher({ encryptionKeys } as unknown as AppConfig);
}

describe('parseEncryptionKeys', () => {
  it('reads id:hex pairs in order, the first being the one new payloads use', () => {
    const problems: string[] = [];
    const keys = parseEncryptionKeys(`k2:${HEX_2}, k1:${HEX_1}`, undefined, problems);

    expect(problems).toEqual([]);
    expect(keys.map((key) => key.id)).toEqual(['k2', 'k1']);
    expect(keys[0].key).toEqual(Buffer.from(HEX_2, 'hex'));
  });

  it("reads Queen's QUEEN_ENCRYPTION_KEY as key id default, after ENCRYPTION_KEYS", () => {
    const problems: string[] = [];

    expect(parseEncryptionKeys(undefined, HEX_1, problems).map((key) => key.id)).toEqual([QUEEN_KEY_ID]);
    expect(parseEncryptionKeys(`k2:${HEX_2}`, HEX_1, problems).map((key) => key.id)).toEqual(['k2', QUEEN_KEY_ID]);
    expect(problems).toEqual([]);
  });

  it('names each bad entry without ever printing a key', () => {
    const problems: string[] = [];
    parseEncryptionKeys(`k1:${HEX_1.slice(2)},${HEX_1},k1:${HEX_1},k1:${HEX_2},default:${HEX_2}`, HEX_1, problems);

    expect(problems).toEqual([
      'ENCRYPTION_KEYS key k1 must be 64 hex characters (32 bytes)',
      'ENCRYPTION_KEYS entry 2 must be <id>:<64 hex characters>, the id 1-32 of A-Z a-z 0-9 _ . -',
      'ENCRYPTION_KEYS names key k1 twice',
      'ENCRYPTION_KEYS key default differs from QUEEN_ENCRYPTION_KEY, which is read as that id',
    ]);
    expect(problems.join(' ')).not.toContain(HEX_1.slice(0, 16));
  });
});

describe('PayloadCipher', () => {
  it('seals a payload as a JSON string under the first key, with a fresh IV each time, and opens it as sent', () => {
    const cipher = cipherWith(`k2:${HEX_2},k1:${HEX_1}`);
    const sent = '{"z":"\u00e9\u{1F600}","a":1.50}';

    const one = cipher.seal(sent);
    const two = cipher.seal(sent);

    expect(one.keyId).toBe('k2');
    expect(JSON.parse(one.json)).toEqual(expect.any(String));
    expect(one.json).not.toBe(two.json);
    expect(cipher.open(one.keyId, one.json)).toBe(sent);
  });

  it('opens what an older key sealed while that key is kept', () => {
    const sealed = cipherWith(`k1:${HEX_1}`).seal('[1,2]');

    expect(cipherWith(`k2:${HEX_2},k1:${HEX_1}`).open(sealed.keyId, sealed.json)).toBe('[1,2]');
    expect(() => cipherWith(`k2:${HEX_2}`).open(sealed.keyId, sealed.json)).toThrow(
      new UnreadablePayloadError('key k1 is not configured'),
    );
  });

  it('refuses altered text, and answers it as null with the reason when asked to report', () => {
    const cipher = cipherWith(`k1:${HEX_1}`);
    const { json } = cipher.seal('"secret"');
    const sealed = Buffer.from(json.slice(1, -1), 'base64');
    // One bit of the ciphertext flipped.
    sealed[30] ^= 1;
    const altered = `"${sealed.toString('base64')}"`;

    expect(() => cipher.open('k1', altered)).toThrow(UnreadablePayloadError);
    expect(() => cipher.open('k1', '"short"')).toThrow('the stored text is not a sealed payload');
    expect(cipher.openOrReport('k1', altered, 'id')).toEqual({
      json: 'null',
      error: 'payload cannot be decrypted: it does not authenticate under key k1',
    });
    expect(cipher.openOrReport(null, '{"plain":true}', 'id')).toEqual({ json: '{"plain":true}' });
  });
});

describe('startupProblem', () => {
  it('is none when nothing is encrypted, or every stored key id is configured', () => {
    expect(startupProblem(undefined, [], [])).toBeUndefined();
    expect(startupProblem('orders', ['k1'], ['k2', 'k1'])).toBeUndefined();
  });

  it('names the queue or the key ids a broker could not open', () => {
    expect(startupProblem('orders', [], [])).toMatch(/^queue "orders" has encryptionEnabled but no encryption key/);
    expect(startupProblem(undefined, ['k1'], [])).toMatch(/^stored payloads are encrypted under key k1 but no/);
    expect(startupProblem('orders', ['k1', 'k2'], ['k2'])).toMatch(
      /^stored payloads are encrypted under key k1, which ENCRYPTION_KEYS does not hold/,
    );
  });
});
