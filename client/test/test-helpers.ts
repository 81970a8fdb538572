import type { ExtendResult } from '../src';

/** Polls `condition` every 10 ms until it holds, failing after `timeoutMs`. */
export async function waitFor(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const giveUpAt = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > giveUpAt) {
      throw new Error(`condition not met within ${timeoutMs} ms`);
    }
    await delay(10);
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves with the abort reason once `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<unknown> {
  if (signal.aborted) {
    return Promise.resolve(signal.reason);
  }
  return new Promise((resolve) => {
    signal.addEventListener('abort', () => resolve(signal.reason), {
      once: true,
    });
  });
}

export function extendAnswer(
  leaseId: string,
  renewed: number,
  hints: Partial<Pick<ExtendResult, 'renewAfterSeconds' | 'deadlineSeconds' | 'leaseStatus' | 'busy'>> = {},
): ExtendResult {
  const expiresAt = renewed > 0 ? new Date(Date.now() + 30_000).toISOString() : null;
  return {
    leaseId,
    success: renewed > 0,
    renewed,
    newExpiresAt: expiresAt,
    expiresAt,
    lease_expires_at: expiresAt,
    lost: renewed === 0 && hints.busy !== true,
    busy: false,
    expiry: expiresAt === null ? null : new Date(expiresAt),
    renewAfterSeconds: null,
    deadlineSeconds: null,
    leaseStatus: null,
    ...hints,
  };
}

/** A promise with its settle functions exposed, to decide when an answer "arrives". */
export function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
