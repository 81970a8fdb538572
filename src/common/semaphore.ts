/** At most `permits` tasks at once; the others wait their turn, first come first served. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly permits: number) {}

  get idle(): boolean {
    return this.active === 0 && this.waiting.length === 0;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.permits) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
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
}

/** A Semaphore per key (a tenant, say), made on first use and dropped once idle. */
export class KeyedSemaphore {
  private readonly semaphores = new Map<string, Semaphore>();

  constructor(private readonly permits: number) {}

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let semaphore = this.semaphores.get(key);
    if (!semaphore) {
      semaphore = new Semaphore(this.permits);
      this.semaphores.set(key, semaphore);
    }
    try {
      return await semaphore.run(task);
    } finally {
      if (semaphore.idle && this.semaphores.get(key) === semaphore) this.semaphores.delete(key);
    }
  }
}
