/** The lease route, declared once: the controller, the fast path, the metrics label and the router's escape use it. */
export const LEASE_CONTROLLER_PATH = 'api/v1/lease';
export const LEASE_EXTEND_PATH = ':leaseId/extend';
/** The route pattern, as metrics label it. */
export const LEASE_EXTEND_ROUTE = `/${LEASE_CONTROLLER_PATH}/${LEASE_EXTEND_PATH}`;
/** The body is `{"seconds": N}`: a few bytes, and nothing else in it is read. */
export const LEASE_BODY_MAX_BYTES = 1024;

export interface LeaseExtendUrl {
  /** Everything before the id, as sent. */
  prefix: string;
  /** The id's path segment, still percent-encoded. */
  segment: string;
  /** Everything after the id (the rest of the path and the query), as sent. */
  suffix: string;
}

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const [BEFORE_ID, AFTER_ID] = LEASE_EXTEND_ROUTE.split(':leaseId');
// Case-insensitive and with an optional trailing slash and query, as Express routes by default.
const PATTERN = new RegExp(`^(${escape(BEFORE_ID)})([^/?]*)(${escape(AFTER_ID)}/?(?:\\?.*)?)$`, 'i');

/** The parts of a lease extend URL, or null for any other URL. */
export function matchLeaseExtend(url: string): LeaseExtendUrl | null {
  const match = PATTERN.exec(url);
  return match ? { prefix: match[1], segment: match[2], suffix: match[3] } : null;
}

/** The parts of a lease extend request's URL, or null for any other request. */
export function matchLeaseExtendRequest(request: { method?: string; url?: string }): LeaseExtendUrl | null {
  return request.method === 'POST' ? matchLeaseExtend(request.url ?? '') : null;
}

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
