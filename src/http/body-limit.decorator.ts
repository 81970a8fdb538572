import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBodyTooLarge, BodyRefusal } from '../common/api-errors.decorator';

export const BODY_LIMIT_KEY = 'leasehold:body-limit';

export type BodyLimit = number | 'BODY_LIMIT';

/** A route without @AcceptsBody says everything in its query and path, so a body is only ever noise. */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/** A body declaring more is refused before a byte is read. */
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
