import { escapeRegExp, PATH_END } from '../http/route-pattern';

export const LEASE_CONTROLLER_PATH = 'api/v1/lease';
export const LEASE_EXTEND_PATH = ':leaseId/extend';
export const LEASE_EXTEND_ROUTE = `/${LEASE_CONTROLLER_PATH}/${LEASE_EXTEND_PATH}`;
/** The body is `{"seconds": N}`: a few bytes, and nothing else in it is read. */
export const LEASE_BODY_MAX_BYTES = 1024;

export interface LeaseExtendUrl {
  prefix: string;
  /** The id's path segment, still percent-encoded. */
  segment: string;
  suffix: string;
}

const [BEFORE_ID, AFTER_ID] = LEASE_EXTEND_ROUTE.split(':leaseId');
// Case-insensitive and with an optional trailing slash and query, as Express routes by default.
const PATTERN = new RegExp(`^(${escapeRegExp(BEFORE_ID)})([^/?]*)(${escapeRegExp(AFTER_ID)}${PATH_END})$`, 'i');

export function matchLeaseExtend(url: string): LeaseExtendUrl | null {
  const match = PATTERN.exec(url);
  return match ? { prefix: match[1], segment: match[2], suffix: match[3] } : null;
}

export function matchLeaseExtendRequest(request: { method?: string; url?: string }): LeaseExtendUrl | null {
  return request.method === 'POST' ? matchLeaseExtend(request.url ?? '') : null;
}

/** The route's parameters, as Express would give them; null for another request or an empty id (the router's 404). */
export function leaseExtendParams(request: { method?: string; url?: string }): Record<string, string> | null {
  const lease = matchLeaseExtendRequest(request);
  return lease && lease.segment !== '' ? { leaseId: leaseIdFromSegment(lease.segment) } : null;
}

/** An undecodable segment is just an unknown id, like any non-UUID, and must not be refused with a 400. */
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
