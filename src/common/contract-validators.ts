import { Transform } from 'class-transformer';
import type { ValidationArguments, ValidationOptions } from 'class-validator';
import { registerDecorator } from 'class-validator/cjs/register-decorator';
import { JSON_MAX_DEPTH, NAME_MAX_LENGTH } from './input';
import { measureJsonText } from './json-text';
import { isUuid } from './uuid';

export type Problem = string | undefined;

export interface ValidationLimits {
  messageMaxBytes?: number;
  /** The body was measured whole and every value in it is storable: IsStoredJson need not measure each again. */
  storableBody?: boolean;
  /**
   * Each payload's JSON text, by the object holding it: given as the caller wrote it (sentPayloads), or serialised and
   * left here by IsStoredJson, so that a payload is measured and checked as the text that is stored.
   */
  storedJson?: Map<object, string>;
}

// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
// Half a surrogate pair: the driver would store U+FFFD (a name would not match itself); escaped, PostgreSQL cannot decode it.
export const UNPAIRED_SURROGATE = /\p{Cs}/u;
const INTEGER = /^-?\d+$/;
// Offsets stop at 15:59: PostgreSQL refuses larger displacements, which JavaScript's Date accepts.
const ISO_TIMESTAMP =
  /^\d{4}-\d{2}-\d{2}(?:([T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)(Z|[+-](?:0\d|1[0-5]):?[0-5]\d)?)?$/i;
const TOO_LARGE = / (?:is|are) larger than \d+ bytes \(\d+\)$/;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The contract answers 413, not 400, to a value above a size limit. */
export function isTooLargeMessage(message: string): boolean {
  return TOO_LARGE.test(message);
}

export function tooLarge(bytes: number, max: number, verb: 'is' | 'are' = 'is'): Problem {
  return bytes > max ? `${verb} larger than ${max} bytes (${bytes})` : undefined;
}

export function messageOf(property: string, problem: string): string {
  return /^[[.:]/.test(problem) ? `${property}${problem}` : `${property} ${problem}`;
}

let limits: ValidationLimits | undefined;

/** Validation is synchronous, so limits can be in force for exactly one validation call. */
export function withValidationLimits<T>(given: ValidationLimits | undefined, validate: () => T): T {
  const previous = limits;
  limits = given;
  try {
    return validate();
  } finally {
    limits = previous;
  }
}

type ByteLimit = 'messageMaxBytes';

function limit(name: ByteLimit): number {
  const value = limits?.[name];
  if (value === undefined) throw new Error(`${name} is not in force: validate with withValidationLimits`);
  return value;
}

/** One rule per property keeps "the first problem in field order" independent of the order decorators run in. */
export function contractRule(
  name: string,
  find: (value: unknown, object: object) => Problem,
  options?: ValidationOptions,
): PropertyDecorator {
  // class-validator asks for the message right after a failed validate, with the same arguments.
  let last: { object: object; value: unknown; problem: Problem } | undefined;
  return (target, propertyName) =>
    registerDecorator({
      name,
      target: target.constructor,
      propertyName: propertyName as string,
      options,
      validator: {
        validate(value: unknown, args: ValidationArguments): boolean {
          const problem = find(value, args.object);
          last = problem === undefined ? undefined : { object: args.object, value, problem };
          return problem === undefined;
        },
        defaultMessage(args: ValidationArguments): string {
          const problem =
            last && last.object === args.object && last.value === args.value
              ? last.problem
              : find(args.value, args.object);
          return messageOf(args.property, problem ?? 'is invalid');
        },
      },
    });
}

/** 1-255 characters without control characters: names end up in URLs, logs and text columns. */
export function nameProblem(value: unknown): Problem {
  if (value === undefined || value === null) return 'is required';
  if (typeof value !== 'string') return 'must be a string';
  if (value.length === 0 || value.length > NAME_MAX_LENGTH) return `must be 1 to ${NAME_MAX_LENGTH} characters long`;
  if (CONTROL_CHARACTER.test(value)) return 'must not contain control characters';
  if (UNPAIRED_SURROGATE.test(value)) return 'must not contain an unpaired UTF-16 surrogate';
  return undefined;
}

export function IsName(options: { optional?: boolean; inQuery?: boolean } = {}): PropertyDecorator {
  return contractRule('isName', (value) => {
    if (options.optional && (value === undefined || value === null)) return undefined;
    if (options.inQuery && Array.isArray(value)) return 'must be given once';
    return nameProblem(value);
  });
}

export function IsUuidText(options: { optional?: boolean } = {}): PropertyDecorator {
  return contractRule('isUuidText', (value) => {
    if (value === undefined || value === null) return options.optional ? undefined : 'is required';
    return isUuid(value) ? undefined : 'must be a UUID';
  });
}

export function IsIntegerBetween(
  min: number,
  max: number,
  options: { nullMeansAbsent?: boolean } = {},
): PropertyDecorator {
  return contractRule('isIntegerBetween', (value) => {
    if (value === undefined || (value === null && options.nullMeansAbsent)) return undefined;
    const fits = typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;
    return fits ? undefined : `must be an integer between ${min} and ${max}`;
  });
}

export function IsTrueOrFalse(options: { nullMeansAbsent?: boolean } = {}): PropertyDecorator {
  return contractRule('isTrueOrFalse', (value) =>
    value === undefined || typeof value === 'boolean' || (value === null && options.nullMeansAbsent)
      ? undefined
      : 'must be true or false',
  );
}

export function IsOptionalText(): PropertyDecorator {
  return contractRule('isOptionalText', (value) =>
    value === undefined || value === null || typeof value === 'string' ? undefined : 'must be a string',
  );
}

/** Checked on the text, where JSON.stringify writes \u0000 and half surrogate pairs as escapes. */
export function storableJsonProblem(json: string): Problem {
  const shape = measureJsonText(json, Infinity, JSON_MAX_DEPTH);
  if (shape.depth > JSON_MAX_DEPTH) return `is nested more than ${JSON_MAX_DEPTH} levels deep`;
  if (shape.nul) return 'must not contain the character \\u0000';
  if (shape.loneSurrogate) return 'must not contain an unpaired UTF-16 surrogate';
  return undefined;
}

export function storedJsonOf(object: object, property: string, storedJson: Map<object, string>): string {
  return storedJson.get(object) ?? JSON.stringify((object as Record<string, unknown>)[property]);
}

export function IsStoredJson(options: { maxBytes: ByteLimit }): PropertyDecorator {
  return contractRule('isStoredJson', (value, object) => {
    if (value === undefined) return 'is required (null is allowed)';
    const json = limits?.storedJson?.get(object) ?? JSON.stringify(value);
    const problem =
      (limits?.storableBody ? undefined : storableJsonProblem(json)) ??
      tooLarge(Buffer.byteLength(json), limit(options.maxBytes));
    if (problem === undefined) limits?.storedJson?.set(object, json);
    return problem;
  });
}

export function queryInteger(value: unknown): unknown {
  return typeof value === 'string' ? (INTEGER.test(value) ? Number(value) : NaN) : Array.isArray(value) ? NaN : value;
}

export function queryBoolean(value: unknown): unknown {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return value;
}

export const ToQueryInteger = (): PropertyDecorator =>
  Transform(({ value }) => queryInteger(value), { toClassOnly: true });

export const ToQueryBoolean = (): PropertyDecorator =>
  Transform(({ value }) => queryBoolean(value), { toClassOnly: true });

/** A form PostgreSQL parses the same way whatever the session time zone (no offset means UTC). */
export function zonedTimestamp(value: unknown): string | undefined {
  const match = typeof value === 'string' ? ISO_TIMESTAMP.exec(value) : null;
  if (!match) return undefined;
  const zoned = match[2] ? match[0] : match[1] ? `${match[0]}Z` : `${match[0]}T00:00:00Z`;
  return Number.isNaN(Date.parse(zoned)) || !isRealDate(match[0]) ? undefined : zoned;
}

/** Date.parse accepts 2026-02-30; PostgreSQL does not. */
function isRealDate(value: string): boolean {
  const [year, month, day] = value.slice(0, 10).split('-').map(Number);
  const date = new Date(Date.UTC(year, month - 1, day));
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}
