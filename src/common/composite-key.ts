/**
 * One map key from several parts. Names cannot contain control characters
 * and ids are UUIDs, so a newline separates them unambiguously.
 */
export function compositeKey(...parts: string[]): string {
  return parts.join('\n');
}

/** The parts of a compositeKey. */
export function splitCompositeKey(key: string): string[] {
  return key.split('\n');
}
