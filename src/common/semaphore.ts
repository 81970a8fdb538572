/** At most `permits` tasks at once; the others wait their turn, first come first served. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly permits: number) {}

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
