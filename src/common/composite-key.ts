/** Names cannot contain control characters and ids are UUIDs, so a newline separates the parts unambiguously. */
export function compositeKey(...parts: string[]): string {
  return parts.join('\n');
}

export function splitCompositeKey(key: string): string[] {
  return key.split('\n');
}
