import type { Pool, PoolClient } from 'pg';
import { DatabaseConfig } from '../config/app-config';
import { DatabaseTimeoutError, PoolUnavailableError } from '../common/database-errors';

/**
 * Time the server's own statement_timeout gets to answer before the broker
 * gives up on the connection: a cancel from the server is a clean error on a
 * healthy connection, closing the connection is the last resort.
 */
export const CLIENT_MARGIN_MS = 1_000;

/** How long one unit of work (a transaction, a renewal) may hold a connection. */
export function workBudgetMs(database: DatabaseConfig): number {
  return database.statementTimeoutMs + CLIENT_MARGIN_MS;
}

/** The documented bound on a request's time with the database: acquire, then the unit of work. */
export function requestBoundMs(database: DatabaseConfig): number {
  return database.acquireTimeoutMs + workBudgetMs(database);
}

/** A monotonic clock for deadlines: wall-clock steps must not cut or stretch them. */
export const monotonicNow = (): number => performance.now();

/**
 * Runs work on a checked-out client. Past `budgetMs` the connection is
 * closed: the server rolls back what it had not committed as soon as it sees
 * the close, no later statement of ours can run on it, and the pool (a
 * GuardedPool) drops it on release. The work then fails with
 * DatabaseTimeoutError.
 */
export async function withinBudget<T>(client: PoolClient, budgetMs: number, work: () => Promise<T>): Promise<T> {
  let expired = false;
  const timer = setTimeout(
    () => {
      expired = true;
      client.end().catch(() => undefined);
    },
    Math.max(0, budgetMs),
  );
  try {
    return await work();
  } catch (error) {
    throw expired ? new DatabaseTimeoutError(budgetMs, error) : error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * pool.connect() bounded by `timeoutMs` as well as by the pool's own acquire
 * timeout: a renewal that already waited for a free slot has less time left.
 * A connection that arrives after the caller gave up goes straight back.
 */
export function acquireWithin(pool: Pool, timeoutMs: number): Promise<PoolClient> {
  return connectWithin(() => pool.connect(), timeoutMs, { late: (client) => client.release() });
}

/**
 * A connection from `connect` within `timeoutMs`, else PoolUnavailableError.
 * `late` gets one that arrives after the caller gave up; `failed` runs when
 * `connect` itself fails.
 */
export function connectWithin<T>(
  connect: () => Promise<T>,
  timeoutMs: number,
  giveBack: { late: (connection: T) => void; failed?: () => void },
): Promise<T> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () => {
        settled = true;
        reject(new PoolUnavailableError(new Error(`no connection within ${Math.round(timeoutMs)} ms`)));
      },
      Math.max(0, timeoutMs),
    );
    connect().then(
      (connection) => {
        if (settled) {
          giveBack.late(connection);
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(connection);
      },
      (error: unknown) => {
        giveBack.failed?.();
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(new PoolUnavailableError(error));
      },
    );
  });
}
