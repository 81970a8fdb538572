import { createPublicKey, KeyObject } from 'node:crypto';
import { get as httpGet, IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { Logger } from '@nestjs/common';
import type { JwksClient } from 'jwks-rsa';
import { JwksConfig } from '../config/app-config';
import { errorMessage } from '../common/error-message';

export interface PublishedKey {
  kid: string | undefined;
  /** The JWK's `alg`, when the provider pins one. */
  alg: string | undefined;
  key: KeyObject;
}

/** The provider answered, recently, and the token's key is not among its keys: the token is refused. */
export class SigningKeyNotFoundError extends Error {
  override readonly name = 'SigningKeyNotFoundError';
}

/** No key set could be fetched: whether the token is good cannot be told now. */
export class IdentityProviderUnavailableError extends Error {
  override readonly name = 'IdentityProviderUnavailableError';
}

/** More than any provider's key set, and bounded so a misdirected URL cannot fill the memory. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * An identity provider's keys, held as one set. jwks-rsa fetches and parses the set (RSA, EC and OKP keys); its own
 * per-kid cache is not used: a set refreshed as a whole drops a key the provider removed, and the last set fetched
 * keeps serving while the provider is unreachable.
 *
 * - A known kid is answered from memory; a set older than `cacheMs` is refreshed in the background meanwhile.
 * - An unknown kid waits for a fetch, at most one every `refetchIntervalMs` (concurrent ones share it), each bounded
 *   by `timeoutMs`, so tokens naming made-up kids neither flood the provider nor hold requests.
 */
export class JwksKeySet {
  private readonly logger = new Logger(JwksKeySet.name);
  private readonly client: JwksClient;
  private keys: PublishedKey[] | undefined;
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private attemptedAt = Number.NEGATIVE_INFINITY;
  private lastAttemptFailed = false;
  private inFlight: Promise<void> | undefined;

  constructor(
    private readonly config: JwksConfig,
    private readonly now: () => number = Date.now,
  ) {
    // Loaded here, not with the module: 2 MB of heap that a broker without a JWKS URL does not need.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { JwksClient: Client } = require('jwks-rsa') as typeof import('jwks-rsa');
    this.client = new Client({
      jwksUri: config.url,
      cache: false,
      rateLimit: false,
      fetcher: (url) => fetchJson(url, config.timeoutMs) as Promise<{ keys: unknown }>,
    });
  }

  /** Seconds a caller refused for want of the provider should wait before trying again. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.config.refetchIntervalMs / 1000));
  }

  async keyFor(kid: string | undefined): Promise<PublishedKey> {
    const known = this.find(kid);
    if (known !== undefined) {
      if (this.now() - this.fetchedAt >= this.config.cacheMs && this.mayFetch()) {
        // Logged where it fails; the set in hand keeps serving.
        this.refresh().catch(() => undefined);
      }
      return known;
    }
    if (this.inFlight === undefined && !this.mayFetch()) {
      throw this.lastAttemptFailed
        ? new IdentityProviderUnavailableError('the key set could not be fetched')
        : new SigningKeyNotFoundError('no such key in the key set fetched moments ago');
    }
    await this.refresh();
    const fetched = this.find(kid);
    if (fetched === undefined) throw new SigningKeyNotFoundError('no such key in the key set');
    return fetched;
  }

  private mayFetch(): boolean {
    return this.now() - this.attemptedAt >= this.config.refetchIntervalMs;
  }

  /** A token without a kid names the only key of a one-key set, as jwks-rsa has it. */
  private find(kid: string | undefined): PublishedKey | undefined {
    if (this.keys === undefined) return undefined;
    if (kid === undefined) return this.keys.length === 1 ? this.keys[0] : undefined;
    return this.keys.find((candidate) => candidate.kid === kid);
  }

  private refresh(): Promise<void> {
    this.inFlight ??= this.fetch().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async fetch(): Promise<void> {
    this.attemptedAt = this.now();
    try {
      const signingKeys = await this.client.getSigningKeys();
      this.keys = signingKeys.map((signingKey) => ({
        kid: signingKey.kid || undefined,
        alg: signingKey.alg || undefined,
        key: createPublicKey(signingKey.getPublicKey()),
      }));
      this.fetchedAt = this.now();
      this.lastAttemptFailed = false;
    } catch (error) {
      this.lastAttemptFailed = true;
      const kept = this.keys === undefined ? 'no keys yet' : 'the keys fetched before stay in use';
      this.logger.warn(`JWKS fetch from ${this.config.url} failed (${errorMessage(error)}); ${kept}`);
      throw new IdentityProviderUnavailableError('the key set could not be fetched');
    }
  }
}

/** The whole exchange, answer included, within `timeoutMs`; a fresh connection each time, closed after. */
function fetchJson(url: string, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (error: Error | undefined, value?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) {
        request.destroy();
        reject(error);
      } else {
        resolve(value);
      }
    };
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const request = get(url, { agent: false, headers: { accept: 'application/json' } }, (response) =>
      readAnswer(response, settle),
    );
    const timer = setTimeout(() => settle(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    request.on('error', (error) => settle(error));
  });
}

function readAnswer(response: IncomingMessage, settle: (error: Error | undefined, value?: unknown) => void): void {
  const status = response.statusCode ?? 0;
  if (status < 200 || status >= 300) {
    response.resume();
    settle(new Error(`status ${status}`));
    return;
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  response.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > MAX_ANSWER_BYTES) settle(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
    else chunks.push(chunk);
  });
  response.on('error', (error) => settle(error));
  response.on('aborted', () => settle(new Error('answer cut short')));
  response.on('end', () => {
    try {
      settle(undefined, JSON.parse(Buffer.concat(chunks).toString('utf8')));
    } catch {
      settle(new Error('answer is not JSON'));
    }
  });
}
