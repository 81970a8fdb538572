import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBodyTooLarge, BodyRefusal } from '../common/api-errors.decorator';

export const BODY_LIMIT_KEY = 'leasehold:body-limit';

/** A route's body bound: bytes, or the operator's BODY_LIMIT for routes that carry batches. */
export type BodyLimit = number | 'BODY_LIMIT';

/** What a route without @AcceptsBody may be sent: its query and path say everything, so a body is only ever noise. */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/**
 * The most a route reads of a body (after decompression, never more than
 * BODY_LIMIT), and its 413 in Swagger with the route's own further bounds.
 * A body declaring more is refused before a byte is read.
 */
export const AcceptsBody = (limit: BodyLimit, ...more: BodyRefusal[]) =>
  applyDecorators(SetMetadata(BODY_LIMIT_KEY, limit), ApiBodyTooLarge(describeLimit(limit), ...more));

export function bodyLimitBytes(limit: BodyLimit | undefined, bodyLimitBytes: number): number {
  if (limit === 'BODY_LIMIT') return bodyLimitBytes;
  return Math.min(limit ?? DEFAULT_BODY_LIMIT, bodyLimitBytes);
}

function describeLimit(limit: BodyLimit): string {
  if (limit === 'BODY_LIMIT') return 'BODY_LIMIT';
  return limit % 1024 === 0 ? `${limit / 1024} KiB` : `${limit} bytes`;
}
