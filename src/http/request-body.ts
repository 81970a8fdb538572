import type { IncomingMessage } from 'node:http';
import { Transform, TransformCallback } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { BadRequestException, HttpException, HttpStatus, PayloadTooLargeException } from '@nestjs/common';
import getRawBody from 'raw-body';
import { isPlainObject } from '../common/contract-validators';
import { JSON_MAX_DEPTH } from '../common/input';
import { JsonSpan, JsonTextShape, jsonPath, measureJsonText, minifiedJson } from '../common/json-text';
import { unknownKeysOf, unknownKeysText } from '../common/unknown-keys';

export interface BodyLimits {
  /** Counted after inflation. */
  limit: number;
  maxInflateRatio: number;
  maxJsonElements: number;
  maxJsonDepth: number;
  /** Bytes a second, on average from the start of the read, once `minRateGraceMs` has passed; 0: none. */
  minBytesPerSecond?: number;
  minRateGraceMs?: number;
}

/** A tiny compressed body may inflate a lot without harm; the ratio is judged past this size. */
const RATIO_FLOOR_BYTES = 64 * 1024;

export const PAYLOAD_TOO_LARGE = 'payload too large';

export const BODY_TOO_SLOW = 'request body arrived too slowly';

/** A body trickling in holds a connection and a request slot for as long as the client likes: it is cut. */
export class SlowBodyException extends HttpException {
  constructor() {
    super({ error: BODY_TOO_SLOW }, HttpStatus.REQUEST_TIMEOUT);
  }
}

/** The client went away before its body arrived: nothing is done for it, and nobody hears the answer. */
export class BodyAbortedError extends BadRequestException {
  constructor() {
    super({ error: 'request aborted' });
  }
}

/** Cut off as soon as it passes the limit or ratio: a compressed bomb costs a few kilobytes of work, not its size. */
export async function readBody(request: IncomingMessage, limits: BodyLimits): Promise<Buffer | undefined> {
  const declared = request.headers['content-length'];
  const length = declared === undefined ? undefined : Number(declared);
  if (length === 0 || (length === undefined && request.headers['transfer-encoding'] === undefined)) return undefined;
  // A compressed body longer than the limit cannot inflate to less.
  if (length !== undefined && length > limits.limit) {
    throw new PayloadTooLargeException({ error: PAYLOAD_TOO_LARGE });
  }
  const source = inflated(request, limits);
  const read = getRawBody(source, { limit: limits.limit, length: source === request ? length : undefined });
  // Watched once raw-body listens: a 'data' listener of our own before it would start the flow without it.
  const rate = watchRate(request, limits);
  try {
    return await (rate ? Promise.race([read, rate.tooSlow]) : read);
  } catch (error) {
    throw bodyError(error);
  } finally {
    rate?.stop();
  }
}

const RATE_CHECK_MS = 500;

/** Counted on the bytes as they arrive, before inflation: what the client really sends. */
function watchRate(
  request: IncomingMessage,
  limits: BodyLimits,
): { tooSlow: Promise<never>; stop: () => void } | undefined {
  const minimum = limits.minBytesPerSecond ?? 0;
  if (minimum === 0 || request.complete) return undefined;
  const grace = limits.minRateGraceMs ?? 0;
  const started = performance.now();
  let received = 0;
  const count = (chunk: Buffer): void => {
    received += chunk.length;
  };
  request.on('data', count);
  let timer: NodeJS.Timeout | undefined;
  const tooSlow = new Promise<never>((_resolve, reject) => {
    timer = setInterval(
      () => {
        const elapsedMs = performance.now() - started;
        if (elapsedMs >= grace && (received * 1000) / elapsedMs < minimum) reject(new SlowBodyException());
      },
      Math.min(RATE_CHECK_MS, grace),
    );
    timer.unref();
  });
  return {
    tooSlow,
    stop: () => {
      clearInterval(timer);
      request.off('data', count);
    },
  };
}

export function parseJsonBody(body: Buffer, limits: BodyLimits): unknown {
  // A UTF-8 byte-order mark is not JSON; some clients send one.
  const text = body.toString('utf8').replace(/^\uFEFF/, '');
  const shape = measureJsonText(text, limits.maxJsonElements, limits.maxJsonDepth, PAYLOAD_MEMBER);
  if (shape.elements > limits.maxJsonElements) {
    throw new PayloadTooLargeException({ error: `JSON body has more than ${limits.maxJsonElements} elements` });
  }
  if (shape.depth > limits.maxJsonDepth) {
    throw new BadRequestException({ error: `JSON body is nested more than ${limits.maxJsonDepth} levels deep` });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadRequestException({ error: 'invalid JSON body' });
  }
  if (typeof parsed === 'object' && parsed !== null) {
    if (isStorable(shape)) storableBodies.add(parsed);
    if (shape.members) sources.set(parsed, { text, payloads: shape.members });
  }
  return parsed;
}

const NO_KEYS: ReadonlySet<string> = new Set();

/** A route without a body says everything in its path and query: what a body would say is refused, not ignored. */
export function assertNoBody(body: unknown): void {
  if (body === undefined || body === null) return;
  const unknown = isPlainObject(body) ? unknownKeysOf(body, NO_KEYS) : undefined;
  if (isPlainObject(body) && unknown === undefined) return;
  const named = unknown === undefined ? '' : `: ${unknownKeysText(unknown, [])}`;
  throw new BadRequestException({ error: `this route takes no request body${named}` });
}

/** Payloads are stored as the caller wrote them: JSON.parse would lose digits, numbers' forms and repeated keys. */
const PAYLOAD_MEMBER = 'payload';

const sources = new WeakMap<object, { text: string; payloads: Map<string, JsonSpan> }>();

/**
 * The payload of each item of the array at `path` in a parsed body, as the caller wrote it, minified, by item.
 * Nothing for a body that was not read from text (nor for items without a payload): those are serialised.
 */
export function sentPayloads(
  body: unknown,
  path: Array<string | number>,
  into = new Map<object, string>(),
): Map<object, string> {
  const source = typeof body === 'object' && body !== null ? sources.get(body) : undefined;
  if (!source) return into;
  let items: unknown = body;
  for (const segment of path) items = (items as Record<string | number, unknown> | null)?.[segment];
  if (!Array.isArray(items)) return into;
  const at = jsonPath(...path);
  for (let index = 0; index < items.length; index += 1) {
    const item: unknown = items[index];
    if (typeof item !== 'object' || item === null || (item as { payload?: unknown }).payload === undefined) continue;
    const span = source.payloads.get(`${at}[${index}]`);
    // The walk and JSON.parse read the same text: a payload it did not find is a fault here, not the caller's.
    if (!span) throw new Error(`the text of ${at}[${index}].payload was not located`);
    into.set(item, minifiedJson(source.text, span));
  }
  return into;
}

/** Parsed bodies whose text was measured storable throughout, so every value in them is. */
const storableBodies = new WeakSet<object>();

export function isStorableBody(body: object): boolean {
  return storableBodies.has(body);
}

function isStorable(shape: JsonTextShape): boolean {
  return !shape.nul && !shape.loneSurrogate && shape.depth <= JSON_MAX_DEPTH;
}

function inflated(request: IncomingMessage, limits: BodyLimits): NodeJS.ReadableStream {
  const encoding = request.headers['content-encoding']?.toLowerCase() ?? 'identity';
  const inflate =
    encoding === 'identity'
      ? undefined
      : encoding === 'gzip' || encoding === 'x-gzip'
        ? createGunzip()
        : encoding === 'deflate'
          ? createInflate()
          : encoding === 'br'
            ? createBrotliDecompress()
            : null;
  if (inflate === undefined) return request;
  if (inflate === null) {
    throw new HttpException(
      { error: 'unsupported content-encoding: send identity, gzip, deflate or br' },
      HttpStatus.UNSUPPORTED_MEDIA_TYPE,
    );
  }
  let compressed = 0;
  request.on('data', (chunk: Buffer) => (compressed += chunk.length));
  const guard = new InflationGuard(limits, () => compressed);
  const fail = (error: Error): void => {
    guard.destroy(error);
  };
  request.once('aborted', () => fail(new BodyAbortedError()));
  inflate.once('error', (error) =>
    fail(Object.assign(new BadRequestException({ error: 'invalid compressed body' }), { cause: error })),
  );
  guard.once('close', () => {
    request.unpipe(inflate);
    inflate.destroy();
    request.resume();
  });
  return request.pipe(inflate).pipe(guard);
}

class InflationGuard extends Transform {
  private inflatedBytes = 0;

  constructor(
    private readonly limits: BodyLimits,
    private readonly compressedBytes: () => number,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.inflatedBytes += chunk.length;
    if (this.inflatedBytes > this.limits.limit) {
      done(new PayloadTooLargeException({ error: PAYLOAD_TOO_LARGE }));
      return;
    }
    const ratio = this.inflatedBytes / Math.max(1, this.compressedBytes());
    if (this.inflatedBytes > RATIO_FLOOR_BYTES && ratio > this.limits.maxInflateRatio) {
      done(
        new PayloadTooLargeException({
          error: `compressed body inflates more than ${this.limits.maxInflateRatio} times`,
        }),
      );
      return;
    }
    done(null, chunk);
  }
}

function bodyError(error: unknown): Error {
  if (error instanceof HttpException) return error;
  const { type } = (error ?? {}) as { type?: string };
  if (type === 'entity.too.large') return new PayloadTooLargeException({ error: PAYLOAD_TOO_LARGE });
  if (type === 'request.aborted') return new BodyAbortedError();
  if (type === 'request.size.invalid')
    return new BadRequestException({ error: 'request body does not match its content-length' });
  return error instanceof Error ? error : new Error(String(error));
}
