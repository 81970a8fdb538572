/**
 * One map key from several parts. Names cannot contain control characters
 * and ids are UUIDs, so a newline separates them unambiguously.
 */
export function compositeKey(...parts: string[]): string {
  return parts.join('\n');
}
