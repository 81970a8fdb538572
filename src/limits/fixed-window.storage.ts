import { ThrottlerStorage } from '@nestjs/throttler';

/** What ThrottlerStorage.increment answers (the package exports the interface, not its record type). */
type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

interface Window {
  startsAt: number;
  hits: number;
}

const IDLE_MS = 60_000;

/** The default storage filters a per-hit expiry list on every request: too slow at thousands of renewals a second. */
export class FixedWindowThrottlerStorage implements ThrottlerStorage {
  private readonly windows = new Map<string, Window>();
  private sweptAt = Date.now();

  increment(key: string, ttl: number, limit: number): Promise<ThrottlerStorageRecord> {
    const now = Date.now();
    this.sweep(now);
    let window = this.windows.get(key);
    if (!window || now - window.startsAt >= ttl) {
      window = { startsAt: now, hits: 0 };
      this.windows.set(key, window);
    }
    window.hits += 1;
    const secondsLeft = Math.max(1, Math.ceil((window.startsAt + ttl - now) / 1000));
    const isBlocked = window.hits > limit;
    return Promise.resolve({
      totalHits: window.hits,
      timeToExpire: secondsLeft,
      isBlocked,
      timeToBlockExpire: isBlocked ? secondsLeft : 0,
    });
  }

  private sweep(now: number): void {
    if (now - this.sweptAt < IDLE_MS) return;
    this.sweptAt = now;
    for (const [key, window] of this.windows) {
      if (now - window.startsAt >= IDLE_MS) this.windows.delete(key);
    }
  }
}
