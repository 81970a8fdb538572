/** One AES-256 key and the id stored with every payload sealed under it. */
export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/** The id QUEEN_ENCRYPTION_KEY's key is stored under: Queen's format has no id of its own. */
export const QUEEN_KEY_ID = 'default';

const KEY_ID = /^[A-Za-z0-9_.-]{1,32}$/;
const KEY_HEX = /^[0-9a-fA-F]{64}$/;

/**
 * ENCRYPTION_KEYS (`id:hex,id:hex`, the first sealing new payloads, the rest kept for reading) and Queen's
 * QUEEN_ENCRYPTION_KEY (one key, read under QUEEN_KEY_ID, and sealing only when ENCRYPTION_KEYS is unset). Problems
 * name the setting and the entry, never a key.
 */
export function parseEncryptionKeys(
  keysSetting: string | undefined,
  queenKey: string | undefined,
  problems: string[],
): EncryptionKey[] {
  const keys: EncryptionKey[] = [];
  const entries = keysSetting === undefined ? [] : keysSetting.split(',').map((entry) => entry.trim());
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    const id = colon < 0 ? '' : entry.slice(0, colon).trim();
    const hex = colon < 0 ? '' : entry.slice(colon + 1).trim();
    if (!KEY_ID.test(id)) {
      problems.push(
        `ENCRYPTION_KEYS entry ${index + 1} must be <id>:<64 hex characters>, the id 1-32 of A-Z a-z 0-9 _ . -`,
      );
    } else if (!KEY_HEX.test(hex)) {
      problems.push(`ENCRYPTION_KEYS key ${id} must be 64 hex characters (32 bytes)`);
    } else if (keys.some((known) => known.id === id)) {
      problems.push(`ENCRYPTION_KEYS names key ${id} twice`);
    } else {
      keys.push({ id, key: Buffer.from(hex, 'hex') });
    }
  });
  if (queenKey !== undefined) {
    if (!KEY_HEX.test(queenKey)) {
      problems.push('QUEEN_ENCRYPTION_KEY must be 64 hex characters (32 bytes)');
    } else {
      const key = Buffer.from(queenKey, 'hex');
      const same = keys.find((known) => known.id === QUEEN_KEY_ID);
      if (same === undefined) keys.push({ id: QUEEN_KEY_ID, key });
      else if (!same.key.equals(key)) {
        problems.push(
          `ENCRYPTION_KEYS key ${QUEEN_KEY_ID} differs from QUEEN_ENCRYPTION_KEY, which is read as that id`,
        );
      }
    }
  }
  return keys;
}
