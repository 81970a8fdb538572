import { Logger } from '@nestjs/common';
import type { ClientBase, PoolClient, PoolConfig } from 'pg';
import { canRollBack, GuardedPool } from './guarded-pool';
import { QueryFailedError } from './query-failed-error';

const logger = new Logger('Database');

/** Slower than this, a statement sent through query() is logged. */
const SLOW_QUERY_MS = 1_000;

/** Failed statements are logged without their parameters: those carry payloads and tenant ids. */
function briefly(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 200);
}

/**
 * An unnamed statement's rows on one connection; a failure as QueryFailedError. The path for statements too rare to
 * prepare (the hot ones go through pipelined-query on the same connection).
 */
export async function queryRows<T = any>(client: ClientBase, text: string, values?: unknown[]): Promise<T[]> {
  const started = Date.now();
  try {
    const result = await client.query(text, values);
    const tookMs = Date.now() - started;
    if (tookMs > SLOW_QUERY_MS) logger.warn(`slow query (${tookMs} ms): ${briefly(text)}`);
    return result.rows as T[];
  } catch (error) {
    logger.warn(`${error instanceof Error ? error.message : String(error)} in: ${briefly(text)}`);
    throw new QueryFailedError(text, values, error);
  }
}

/** Statements one after another on one connection, each one's rows: a round trip's worth, sent one at a time. */
export async function queryEach(
  client: ClientBase,
  statements: ReadonlyArray<{ text: string; values?: unknown[] }>,
): Promise<unknown[][]> {
  const results: unknown[][] = [];
  for (const { text, values } of statements) results.push(await queryRows(client, text, values));
  return results;
}

/** BEGIN, the work and COMMIT on one connection; rolled back when the work fails. */
export async function inTransaction<T>(client: PoolClient, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // Not behind a statement still in flight: the guarded pool closes that connection instead.
    if (canRollBack(client, error)) await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** What a transaction's work may send on its connection besides its statements: one unnamed statement at a time. */
export interface Session {
  query<T = any>(text: string, values?: unknown[]): Promise<T[]>;
}

export function sessionOf(client: ClientBase): Session {
  return { query: (text, values) => queryRows(client, text, values) };
}

/** The broker's connection pool. Transactions go through TransactionRunner; query() is for one statement on its own. */
export class Database {
  readonly pool: GuardedPool;

  constructor(config: PoolConfig) {
    this.pool = new GuardedPool(config);
    // Unhandled, an idle connection's error would crash the process; the pool drops that connection itself.
    this.pool.on('error', (error) => logger.warn(`Postgres pool raised an error. ${error.message}`));
  }

  async query<T = any>(text: string, values?: unknown[]): Promise<T[]> {
    // The embedded server interleaves other connections' messages into a statement with parameters sent outside a
    // transaction (DatabaseEngine); inside one it does not.
    if (values !== undefined && values.length > 0) return this.transaction((session) => session.query<T>(text, values));
    const client = await this.pool.connect();
    try {
      return await queryRows<T>(client, text, values);
    } finally {
      // The guarded pool closes a connection left mid-statement or mid-transaction; pg's, one no longer queryable.
      client.release();
    }
  }

  /** Statements in one transaction on one connection, committed unless the work fails. */
  async transaction<T>(work: (session: Session) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      return await inTransaction(client, () => work(sessionOf(client)));
    } finally {
      client.release();
    }
  }

  end(): Promise<void> {
    return this.pool.ended ? Promise.resolve() : this.pool.end();
  }
}
