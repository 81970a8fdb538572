import { MAX_TIMER_MS } from './timing';

export interface LinkedSignal {
  signal: AbortSignal;
  unlink(): void;
}

// Not AbortSignal.any: Node 20 keeps an entry on a source for every signal ever derived from
// it, which grows without bound on a consumer's long-lived stop signal. This one unlinks.
export function linkSignals(sources: (AbortSignal | undefined)[], timeoutMs?: number): LinkedSignal {
  const controller = new AbortController();
  const cleanups: (() => void)[] = [];
  const unlink = (): void => {
    for (const cleanup of cleanups.splice(0)) {
      cleanup();
    }
  };
  const abort = (reason: unknown): void => {
    unlink();
    controller.abort(reason);
  };
  for (const source of sources) {
    if (source === undefined) {
      continue;
    }
    if (source.aborted) {
      abort(source.reason);
      break;
    }
    const follow = (): void => abort(source.reason);
    source.addEventListener('abort', follow, { once: true });
    cleanups.push(() => source.removeEventListener('abort', follow));
  }
  // Past the timer limit means no timeout at all.
  if (timeoutMs !== undefined && timeoutMs <= MAX_TIMER_MS && !controller.signal.aborted) {
    const timer = setTimeout(() => abort(new DOMException('The operation timed out', 'TimeoutError')), timeoutMs);
    timer.unref();
    cleanups.push(() => clearTimeout(timer));
  }
  return { signal: controller.signal, unlink };
}
