import { FixedWindowThrottlerStorage } from './fixed-window.storage';

describe('FixedWindowThrottlerStorage', () => {
  let storage: FixedWindowThrottlerStorage;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
    storage = new FixedWindowThrottlerStorage();
  });

  afterEach(() => jest.useRealTimers());

  it('takes several hits at once while they fit, and counts them with the requests of the same key', async () => {
    expect(storage.take('t\nconsume', 1_000, 5, 3)).toEqual({ taken: true, secondsLeft: 1 });
    expect(await storage.increment('t\nconsume', 1_000, 5)).toMatchObject({
      totalHits: 4,
      isBlocked: false,
    });
    expect(storage.take('t\nconsume', 1_000, 5, 1)).toMatchObject({ taken: true });
    expect(await storage.increment('t\nconsume', 1_000, 5)).toMatchObject({ isBlocked: true });
  });

  it('takes nothing of a charge that does not fit, so a smaller one still passes', () => {
    expect(storage.take('t\nconsume', 1_000, 5, 4)).toMatchObject({ taken: true });
    expect(storage.take('t\nconsume', 1_000, 5, 2)).toMatchObject({ taken: false });
    expect(storage.take('t\nconsume', 1_000, 5, 1)).toMatchObject({ taken: true });
    expect(storage.take('t\nconsume', 1_000, 5, 1)).toMatchObject({ taken: false });
  });

  it('lets a charge above the whole limit pass alone in a window, as the limit', () => {
    expect(storage.take('t\nconsume', 1_000, 2, 5)).toMatchObject({ taken: true });
    expect(storage.take('t\nconsume', 1_000, 2, 1)).toMatchObject({ taken: false });
    jest.advanceTimersByTime(1_000);
    expect(storage.take('t\nconsume', 1_000, 2, 1)).toMatchObject({ taken: true });
    expect(storage.take('t\nconsume', 1_000, 2, 5)).toMatchObject({ taken: false });
  });

  it('keeps tenants and classes apart, and starts a new window once the last one ended', () => {
    expect(storage.take('a\nconsume', 1_000, 1, 1)).toMatchObject({ taken: true });
    expect(storage.take('b\nconsume', 1_000, 1, 1)).toMatchObject({ taken: true });
    expect(storage.take('a\nproduce', 1_000, 1, 1)).toMatchObject({ taken: true });
    expect(storage.take('a\nconsume', 1_000, 1, 1)).toMatchObject({ taken: false });
    jest.advanceTimersByTime(999);
    expect(storage.take('a\nconsume', 1_000, 1, 1)).toMatchObject({ taken: false, secondsLeft: 1 });
    jest.advanceTimersByTime(1);
    expect(storage.take('a\nconsume', 1_000, 1, 1)).toMatchObject({ taken: true });
  });

  it('frees windows idle a minute, and keeps one renewed since though it was made first', () => {
    storage.take('renewed\nconsume', 1_000, 5, 1);
    storage.take('idle\nconsume', 1_000, 5, 1);
    jest.advanceTimersByTime(30_000);
    storage.take('renewed\nconsume', 1_000, 5, 1);
    jest.advanceTimersByTime(31_000);
    storage.take('new\nconsume', 1_000, 5, 1);

    // The idle window went; the renewed one (31 s old) and the new one stay.
    expect(storage.size).toBe(2);
    expect(storage.take('renewed\nconsume', 1_000, 5, 1)).toMatchObject({ taken: true });
  });
});
