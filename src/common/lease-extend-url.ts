/** `/api/v1/lease/<id>/extend`, with the id captured as sent (still percent-encoded). */
export const LEASE_EXTEND_URL = /^(\/api\/v1\/lease\/)([^/?]*)(\/extend\/?(?:\?.*)?)$/i;

/**
 * The lease id a path segment names. A segment whose percent-encoding does
 * not decode names itself as sent: such an id is simply unknown, like any
 * other that is not a UUID, and must not be refused with a 400.
 */
export function leaseIdFromSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function decodesCleanly(segment: string): boolean {
  try {
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}
