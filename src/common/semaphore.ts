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
