// Node fires any longer setTimeout at once instead of never.
export const MAX_TIMER_MS = 2_147_483_647;

// The wall clock can jump (NTP, a user); deadlines need a clock that cannot.
export function monotonicNow(): number {
  return performance.now();
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

// Drawn from the upper half of each step, so workers failing together do not retry together.
export function backoffDelay(attempt: number, initialMs: number, maxMs: number): number {
  const step = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt - 1));
  return step / 2 + (Math.random() * step) / 2;
}
