import { Injectable } from '@nestjs/common';
import { ThrottlerStorage } from '@nestjs/throttler';

/** What ThrottlerStorage.increment answers (the package exports the interface, not its record type). */
type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

interface Window {
  startsAt: number;
  hits: number;
}

export interface Charge {
  taken: boolean;
  /** Seconds until the window ends, at least 1: the Retry-After of a refusal. */
  secondsLeft: number;
}

const IDLE_MS = 60_000;

/** The default storage filters a per-hit expiry list on every request: too slow at thousands of renewals a second. */
@Injectable()
export class FixedWindowThrottlerStorage implements ThrottlerStorage {
  private readonly windows = new Map<string, Window>();
  private sweptAt = Date.now();

  increment(key: string, ttl: number, limit: number): Promise<ThrottlerStorageRecord> {
    const now = Date.now();
    const window = this.windowOf(key, ttl, now);
    window.hits += 1;
    const secondsLeft = secondsLeftOf(window, ttl, now);
    const isBlocked = window.hits > limit;
    return Promise.resolve({
      totalHits: window.hits,
      timeToExpire: secondsLeft,
      isBlocked,
      timeToBlockExpire: isBlocked ? secondsLeft : 0,
    });
  }

  /**
   * Several hits at once, taken only if they all fit: a refused charge takes nothing. One larger than the whole limit
   * counts as the limit, so it passes in a window of its own instead of never.
   */
  take(key: string, ttl: number, limit: number, hits: number): Charge {
    const now = Date.now();
    const window = this.windowOf(key, ttl, now);
    const charge = Math.min(hits, limit);
    const taken = window.hits + charge <= limit;
    if (taken) window.hits += charge;
    return { taken, secondsLeft: secondsLeftOf(window, ttl, now) };
  }

  private windowOf(key: string, ttl: number, now: number): Window {
    this.sweep(now);
    let window = this.windows.get(key);
    if (!window || now - window.startsAt >= ttl) {
      window = { startsAt: now, hits: 0 };
      // Re-inserted, so the map runs oldest window first and a sweep stops at the first one still in use.
      this.windows.delete(key);
      this.windows.set(key, window);
    }
    return window;
  }

  /** Looks only at the windows it frees, and the first it keeps: not at every tenant's, inside a request. */
  private sweep(now: number): void {
    if (now - this.sweptAt < IDLE_MS) return;
    this.sweptAt = now;
    for (const [key, window] of this.windows) {
      if (now - window.startsAt < IDLE_MS) break;
      this.windows.delete(key);
    }
  }

  /** Windows held, for tests. */
  get size(): number {
    return this.windows.size;
  }
}

function secondsLeftOf(window: Window, ttl: number, now: number): number {
  return Math.max(1, Math.ceil((window.startsAt + ttl - now) / 1000));
}
