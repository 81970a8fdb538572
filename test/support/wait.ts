import { Client } from 'pg';
import { sleep } from './sleep';

/** Polls until the condition holds; the bound is generous because the machine running the tests may be loaded. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const giveUpAt = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > giveUpAt) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(10);
  }
}

/** Polls until the probe returns a value, and returns it. */
export async function waitForValue<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  let value: T | undefined;
  await waitFor(async () => (value = await probe()) !== undefined, what, timeoutMs);
  return value!;
}

/** Waits until a session runs a statement containing `fragment` (or one of them) and is blocked on a lock. */
export async function waitForLockWaiter(observer: Client, fragment: string | readonly string[]): Promise<void> {
  const fragments = typeof fragment === 'string' ? [fragment] : [...fragment];
  await waitFor(
    async () => {
      // Inside a transaction the statistics are a snapshot taken at first use: take a fresh one.
      await observer.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await observer.query(
        `SELECT count(*)::int AS waiting FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND datname = current_database()
          AND EXISTS (SELECT 1 FROM unnest($1::text[]) AS f(fragment) WHERE position(f.fragment in query) > 0)`,
        [fragments],
      );
      return rows[0].waiting > 0;
    },
    `a statement containing ${fragments.map((one) => `"${one}"`).join(' or ')} waiting for a lock`,
  );
}

/**
 * An ack's first statement on its cursor, by a fragment of its text: the lock of its cursors, or the one statement
 * that saves the ack of a batch this process handed out (AckService.decideOnClaim).
 */
export const ACK_ON_ITS_CURSOR = ['AS u(partition_id, consumer_group)', 'WITH held_handed_out AS'] as const;

/** Whether a server process with this pid still exists. */
export async function sessionExists(observer: Client, pid: number): Promise<boolean> {
  const { rows } = await observer.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid]);
  return rows[0].n > 0;
}

/** The promise's value, or a failure naming what did not happen in time. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
