import { KEY_TOLERANCE, nearMiss } from './near-miss';

/** An error names a few keys, each cut short: it stays short whatever a caller sends. */
export const NAMED_KEYS_MAX = 3;
export const QUOTED_KEY_MAX_LENGTH = 40;

export interface UnknownKeys {
  /** The first few, in the order sent. */
  named: string[];
  total: number;
}

export function quotedKey(key: string): string {
  return JSON.stringify(key.length > QUOTED_KEY_MAX_LENGTH ? `${key.slice(0, QUOTED_KEY_MAX_LENGTH)}...` : key);
}

/** The keys of `plain` outside `accepted`; undefined when there are none. */
export function unknownKeysOf(plain: object, accepted: ReadonlySet<string>): UnknownKeys | undefined {
  let unknown: UnknownKeys | undefined;
  for (const key in plain) {
    if (accepted.has(key)) continue;
    unknown ??= { named: [], total: 0 };
    if (unknown.named.length < NAMED_KEYS_MAX) unknown.named.push(key);
    unknown.total += 1;
  }
  return unknown;
}

/** `unknown key "option"; did you mean "options"?`, or a few named, each with its likely intent, and how many more. */
export function unknownKeysText({ named, total }: UnknownKeys, suggestions: readonly string[], noun = 'key'): string {
  if (total === 1) {
    const guess = nearMiss(named[0], suggestions, KEY_TOLERANCE);
    return `unknown ${noun} ${quotedKey(named[0])}${guess === undefined ? '' : `; did you mean ${quotedKey(guess)}?`}`;
  }
  const listed = named.map((key) => {
    const guess = nearMiss(key, suggestions, KEY_TOLERANCE);
    return guess === undefined ? quotedKey(key) : `${quotedKey(key)} (did you mean ${quotedKey(guess)}?)`;
  });
  const more = total - named.length;
  return `unknown ${noun}s ${listed.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}
