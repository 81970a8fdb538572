import { Logger } from '@nestjs/common';
import pg, { PoolClient } from 'pg';

type ConnectCallback = (
  error: Error | undefined,
  client: PoolClient | undefined,
  release: (error?: unknown) => void,
) => void;

const logger = new Logger('Database');

export class UnsafeConnectionError extends Error {
  constructor(state: string) {
    super(`connection released ${state}; closed instead of reused`);
    this.name = 'UnsafeConnectionError';
  }
}

export class PoolShrankError extends Error {
  constructor() {
    super('connection past the pool size; closed');
    this.name = 'PoolShrankError';
  }
}

export class ReadOnlyConnectionError extends Error {
  constructor() {
    super('connection to a read-only server; closed instead of reused');
    this.name = 'ReadOnlyConnectionError';
  }
}

/** Reused, such a connection would run the next request's statements inside the abandoned transaction. */
export function unsafeState(client: PoolClient): string | undefined {
  if (statementInFlight(client)) return 'with a statement in flight';
  const status = client.getTransactionStatus();
  if (status === 'T') return 'inside a transaction';
  if (status === 'E') return 'inside a failed transaction';
  return undefined;
}

const READ_ONLY_SQL_TRANSACTION = '25006';

/**
 * Also true between a statement's error and ReadyForQuery: closing then is the safe side of the race.
 * Null status: released before anything was sent.
 */
export function statementInFlight(client: PoolClient): boolean {
  if (client.getTransactionStatus() === null) return false;
  return (client as unknown as { readyForQuery?: boolean }).readyForQuery !== true;
}

/** Not after a client-side timeout or lost connection: ROLLBACK would queue behind the running statement. */
export function canRollBack(client: PoolClient, error: unknown): boolean {
  const driverError = (error as { driverError?: unknown } | null)?.driverError ?? error;
  return driverError instanceof pg.DatabaseError || !statementInFlight(client);
}

/** Closes rather than reuses a connection released in an unsafe state; closing makes the server roll it back. */
export class GuardedPool extends pg.Pool {
  override connect(): Promise<PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<PoolClient> | void {
    if (!callback) {
      return new Promise((resolve, reject) => {
        this.connect((error, client) => (error ? reject(error) : resolve(client!)));
      });
    }
    super.connect((error, client, release) => {
      if (error || !client) {
        callback(error, client, release);
        return;
      }
      // pg emits 'error' on socket failure even mid-query, but the pool listens only while the client is idle:
      // unhandled, a connection reset during a checkout would crash the process.
      const onError = (socketError: Error): void => {
        logger.warn(`Connection lost while in use: ${socketError.message}`);
      };
      client.on('error', onError);
      // A demoted standby or a read-only session: only a new connection can reach the primary.
      let readOnly = false;
      const onServerError = (message: { code?: string }): void => {
        if (message.code === READ_ONLY_SQL_TRANSACTION) readOnly = true;
      };
      client.connection.on('errorMessage', onServerError);
      const guardedRelease = (releaseError?: unknown): void => {
        client.removeListener('error', onError);
        client.connection.removeListener('errorMessage', onServerError);
        if (!releaseError && readOnly) {
          logger.warn('A connection whose server refused a write as read-only was released; closing it to reconnect');
          release(new ReadOnlyConnectionError());
          return;
        }
        const state = releaseError ? undefined : unsafeState(client);
        if (state) logger.warn(`A connection was released ${state}; closing it so its transaction cannot be reused`);
        // The pool was made smaller (more brokers share the database): a connection past its size closes.
        const shrunk = !releaseError && !state && this.totalCount > this.options.max;
        release(
          releaseError ?? (state ? new UnsafeConnectionError(state) : shrunk ? new PoolShrankError() : undefined),
        );
      };
      client.release = guardedRelease;
      callback(undefined, client, guardedRelease);
    });
  }
}

export const guardedPg = { ...pg, Pool: GuardedPool };
