import type { Pool, PoolClient } from 'pg';
import { DatabaseConfig } from '../config/app-config';
import { DatabaseTimeoutError, PoolUnavailableError } from '../common/database-errors';

/** Lets statement_timeout cancel first: a clean error on a healthy connection; closing it is the last resort. */
export const CLIENT_MARGIN_MS = 1_000;

export function workBudgetMs(database: DatabaseConfig): number {
  return database.statementTimeoutMs + CLIENT_MARGIN_MS;
}

export function requestBoundMs(database: DatabaseConfig): number {
  return database.acquireTimeoutMs + workBudgetMs(database);
}

/** A monotonic clock for deadlines: wall-clock steps must not cut or stretch them. */
export const monotonicNow = (): number => performance.now();

/** Past `budgetMs` the connection is closed: the server rolls back and the GuardedPool drops it on release. */
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

/** Bounded by `timeoutMs` too: a renewal that already waited for a free slot has less time left. */
export function acquireWithin(pool: Pool, timeoutMs: number): Promise<PoolClient> {
  return connectWithin(() => pool.connect(), timeoutMs, { late: (client) => client.release() });
}

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
