import { BadRequestException } from '@nestjs/common';
import { measureJsonText } from './json-text';
import { isUuid } from './uuid';

/** The largest value of a PostgreSQL integer column, and of the broker's integer parameters. */
export const INT32_MAX = 2_147_483_647;
/** Queue, partition and consumer group names, transaction and trace ids. */
export const NAME_MAX_LENGTH = 255;
/** Deeper JSON than this is refused: JavaScript and PostgreSQL both recurse over it. */
export const JSON_MAX_DEPTH = 100;
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
// PostgreSQL keeps text as UTF-8, which cannot encode half a surrogate pair:
// the driver would store U+FFFD instead (so a name would no longer match
// itself), and jsonb refuses the escape outright.
const UNPAIRED_SURROGATE = /\p{Cs}/u;
const INTEGER = /^-?\d+$/;
// Offsets stop at 15:59: PostgreSQL refuses larger displacements, which JavaScript's Date accepts.
const ISO_TIMESTAMP =
  /^\d{4}-\d{2}-\d{2}(?:([T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)(Z|[+-](?:0\d|1[0-5]):?[0-5]\d)?)?$/i;

/** A 400 in the contract's shape. */
export function invalid(message: string): BadRequestException {
  return new BadRequestException({ error: message });
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The request body or a nested object; a missing body, an array or a scalar is a 400. */
export function requireObject(value: unknown, field: string): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw invalid(`${field} must be a JSON object`);
  }
  return value;
}

/** 1-255 characters without control characters: names end up in URLs, logs and text columns. */
export function requireName(value: unknown, field: string): string {
  if (value === undefined || value === null) {
    throw invalid(`${field} is required`);
  }
  if (typeof value !== 'string') {
    throw invalid(`${field} must be a string`);
  }
  if (value.length === 0 || value.length > NAME_MAX_LENGTH) {
    throw invalid(`${field} must be 1 to ${NAME_MAX_LENGTH} characters long`);
  }
  if (CONTROL_CHARACTER.test(value)) {
    throw invalid(`${field} must not contain control characters`);
  }
  if (UNPAIRED_SURROGATE.test(value)) {
    throw invalid(`${field} must not contain an unpaired UTF-16 surrogate`);
  }
  return value;
}

/** As requireName, but absent and null mean "not given". */
export function optionalName(value: unknown, field: string): string | undefined {
  return value === undefined || value === null ? undefined : requireName(value, field);
}

/** A UUID, lower-cased; anything else is a 400. */
export function requireUuid(value: unknown, field: string): string {
  if (value === undefined || value === null) {
    throw invalid(`${field} is required`);
  }
  if (!isUuid(value)) {
    throw invalid(`${field} must be a UUID`);
  }
  return value.toLowerCase();
}

export function optionalUuid(value: unknown, field: string): string | undefined {
  return value === undefined || value === null ? undefined : requireUuid(value, field);
}

/** A JSON integer within [min, max]; absent means the fallback. */
export function optionalInteger(value: unknown, field: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(`${field} must be an integer between ${min} and ${max}`);
  }
  return value;
}

export function optionalBoolean(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') {
    throw invalid(`${field} must be true or false`);
  }
  return value;
}

/**
 * The value as the JSON text that will be stored: anything JSON can carry,
 * except what PostgreSQL's jsonb cannot store (\u0000, half a surrogate pair)
 * and nesting deep enough to exhaust a stack on either side. Checked on the
 * text (JSON.stringify writes both as escapes), without walking the value.
 */
export function storableJsonText(value: unknown, field: string): string {
  const json = JSON.stringify(value);
  const shape = measureJsonText(json, Infinity, JSON_MAX_DEPTH);
  if (shape.depth > JSON_MAX_DEPTH) throw invalid(`${field} is nested more than ${JSON_MAX_DEPTH} levels deep`);
  if (shape.nul) throw invalid(`${field} must not contain the character \\u0000`);
  if (shape.loneSurrogate) throw invalid(`${field} must not contain an unpaired UTF-16 surrogate`);
  return json;
}

/** A query-string integer: digits only (no "1.0", "1e3" or " 1"), within [min, max]. */
export function queryInteger(value: unknown, field: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const parsed = typeof value === 'string' && INTEGER.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max) {
    throw invalid(`${field} must be an integer between ${min} and ${max}`);
  }
  return parsed;
}

export function queryBoolean(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw invalid(`${field} must be true or false`);
}

/** A query-string name (queue, consumer group); an empty value is a 400, not "absent". */
export function queryName(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalid(`${field} must be given once`);
  return requireName(value, field);
}

/**
 * An ISO-8601 date or date-time, returned in a form PostgreSQL parses the
 * same way whatever the session time zone: a value without an offset is UTC.
 */
export function queryTimestamp(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  const match = typeof value === 'string' ? ISO_TIMESTAMP.exec(value) : null;
  const zoned = !match ? '' : match[2] ? match[0] : match[1] ? `${match[0]}Z` : `${match[0]}T00:00:00Z`;
  if (!match || Number.isNaN(Date.parse(zoned)) || !isRealDate(match[0])) {
    throw invalid(`${field} must be an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z`);
  }
  return zoned;
}

/** Date.parse accepts 2026-02-30; PostgreSQL does not. */
function isRealDate(value: string): boolean {
  const [year, month, day] = value.slice(0, 10).split('-').map(Number);
  const date = new Date(Date.UTC(year, month - 1, day));
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
