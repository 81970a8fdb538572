export class TurnTimeoutError extends Error {
  constructor() {
    super('no turn within the time allowed');
    this.name = 'TurnTimeoutError';
  }
}

export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly permits: number) {}

  get idle(): boolean {
    return this.active === 0 && this.waiting.length === 0;
  }

  async run<T>(task: () => Promise<T>, timeoutMs = Infinity): Promise<T> {
    if (this.active >= this.permits) {
      await this.turn(timeoutMs);
    } else {
      this.active += 1;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }

  private turn(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const grant = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer =
        timeoutMs === Infinity
          ? undefined
          : setTimeout(
              () => {
                this.waiting.splice(this.waiting.indexOf(grant), 1);
                reject(new TurnTimeoutError());
              },
              Math.max(0, timeoutMs),
            );
      this.waiting.push(grant);
    });
  }
}

export class KeyedSemaphore {
  private readonly semaphores = new Map<string, Semaphore>();

  constructor(private readonly permits: number) {}

  async run<T>(key: string, task: () => Promise<T>, timeoutMs = Infinity): Promise<T> {
    let semaphore = this.semaphores.get(key);
    if (!semaphore) {
      semaphore = new Semaphore(this.permits);
      this.semaphores.set(key, semaphore);
    }
    try {
      return await semaphore.run(task, timeoutMs);
    } finally {
      if (semaphore.idle && this.semaphores.get(key) === semaphore) this.semaphores.delete(key);
    }
  }
}

/** Permits taken without waiting: a caller past its share is refused at once rather than queued. */
export class KeyedPermits {
  private readonly taken = new Map<string, number>();

  constructor(private readonly permits: number) {}

  /** The release to call once, or undefined when the key has no permit left. */
  tryAcquire(key: string): (() => void) | undefined {
    const held = this.taken.get(key) ?? 0;
    if (held >= this.permits) return undefined;
    this.taken.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.taken.get(key) ?? 1) - 1;
      if (left > 0) this.taken.set(key, left);
      else this.taken.delete(key);
    };
  }

  held(key: string): number {
    return this.taken.get(key) ?? 0;
  }
}
