import { BadRequestException } from '@nestjs/common';
import type { Response } from 'express';

export const NOT_A_PAGE_CURSOR = 'after is not a page cursor';

/** A listing's position: the keys of the last entry it walked past, opaque to the caller. */
export function pageToken(keys: Array<string | number>): string {
  return Buffer.from(JSON.stringify(keys)).toString('base64url');
}

/** The keys of a token, each checked by `valid` (which also fixes how many there are); a bad token is a 400. */
export function pageKeys(token: string, valid: (keys: unknown[]) => boolean): unknown[] {
  let keys: unknown;
  try {
    keys = JSON.parse(Buffer.from(token, 'base64url').toString());
  } catch {
    throw new BadRequestException({ error: NOT_A_PAGE_CURSOR });
  }
  if (!Array.isArray(keys) || !valid(keys)) throw new BadRequestException({ error: NOT_A_PAGE_CURSOR });
  return keys;
}

/** Listings that answer a bare array tell where the next page starts in a header; none means the last page. */
export const NEXT_PAGE_HEADER = 'X-Next-After';

export function sendNextPage(response: Response, next: string | null): void {
  if (next !== null) response.setHeader(NEXT_PAGE_HEADER, next);
}

export interface Page<T> {
  entries: T[];
  next: string | null;
}
