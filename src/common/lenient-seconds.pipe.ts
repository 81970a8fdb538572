import { Injectable, PipeTransform } from '@nestjs/common';

export const DEFAULT_EXTEND_SECONDS = 60;
const INT32_MAX = 2_147_483_647;
const INT32_MIN = -2_147_483_648;

/**
 * Turns whatever body arrived on the lease-extension route into a number of
 * seconds, never failing: the reference page promises no 400 on this route.
 * The body arrives raw (a Buffer, or nothing), because Express's JSON parser
 * would reject malformed JSON before any pipe ran.
 *
 * Anything that is not an object carrying a 32-bit integer `seconds` means
 * the default of 60; integers below 1 become 1. Upper caps are the service's
 * business (LEASE_MAX_EXTEND_SECONDS).
 */
@Injectable()
export class LenientSecondsPipe implements PipeTransform<unknown, number> {
  transform(body: unknown): number {
    const seconds = readSeconds(parseBody(body));
    if (seconds === undefined) return DEFAULT_EXTEND_SECONDS;
    return Math.max(1, seconds);
  }
}

function parseBody(body: unknown): unknown {
  if (Buffer.isBuffer(body)) {
    return parseJson(body.toString('utf8'));
  }
  if (typeof body === 'string') {
    return parseJson(body);
  }
  return body;
}

function parseJson(text: string): unknown {
  try {
    // Strip a UTF-8 byte-order mark: some clients send one and it is not JSON.
    return JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    return undefined;
  }
}

function readSeconds(parsed: unknown): number | undefined {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const seconds = (parsed as Record<string, unknown>).seconds;
  if (typeof seconds !== 'number' || !Number.isInteger(seconds)) return undefined;
  if (seconds > INT32_MAX || seconds < INT32_MIN) return undefined;
  return seconds;
}
