import { Logger } from '@nestjs/common';
import pg, { PoolClient } from 'pg';
import type { DataSource } from 'typeorm';

type ConnectCallback = (
  error: Error | undefined,
  client: PoolClient | undefined,
  release: (error?: unknown) => void,
) => void;

const logger = new Logger('Database');

/** Released while a statement was still running or a transaction was still open. */
export class UnsafeConnectionError extends Error {
  constructor(state: string) {
    super(`connection released ${state}; closed instead of reused`);
    this.name = 'UnsafeConnectionError';
  }
}

/** Its server refused a write as read-only (SQLSTATE 25006). */
export class ReadOnlyConnectionError extends Error {
  constructor() {
    super('connection to a read-only server; closed instead of reused');
    this.name = 'ReadOnlyConnectionError';
  }
}

/**
 * Why a connection may not go back to the pool, or undefined when it may.
 * A client-side timeout leaves its statement running on the server and a
 * failed ROLLBACK leaves the transaction open: reused, such a connection
 * would run the next request's statements inside the abandoned transaction
 * and commit both together. The driver knows the server's transaction
 * status from its last ReadyForQuery, and `readyForQuery` is false while a
 * statement is in flight.
 */
export function unsafeState(client: PoolClient): string | undefined {
  if (statementInFlight(client)) return 'with a statement in flight';
  const status = client.getTransactionStatus();
  if (status === 'T') return 'inside a transaction';
  if (status === 'E') return 'inside a failed transaction';
  return undefined;
}

/** SQLSTATE read_only_sql_transaction: a write refused by a standby or a read-only session. */
const READ_ONLY_SQL_TRANSACTION = '25006';

/**
 * Between a statement's error and the server's ReadyForQuery this is true as
 * well: a connection released then is closed, the safe side of the race. A
 * connection released from within its own connect callback (TypeORM's probe
 * of a new pool) has no transaction status yet: nothing was ever sent on it.
 */
export function statementInFlight(client: PoolClient): boolean {
  if (client.getTransactionStatus() === null) return false;
  return (client as unknown as { readyForQuery?: boolean }).readyForQuery !== true;
}

/**
 * Whether ROLLBACK is worth sending after `error`: the server refused a
 * statement (it answers, and the driver sends the ROLLBACK once it is ready),
 * or our own code threw between statements. Not after a client-side timeout
 * or a lost connection: ROLLBACK would queue behind the statement still
 * running, and closing the connection rolls back anyway.
 */
export function canRollBack(client: PoolClient, error: unknown): boolean {
  const driverError = (error as { driverError?: unknown } | null)?.driverError ?? error;
  return driverError instanceof pg.DatabaseError || !statementInFlight(client);
}

/**
 * pg's Pool, except that a released connection in an unsafe state is closed
 * rather than reused. Closing it is also what makes the server roll back
 * whatever it held. Every path that checks a connection out of the
 * application's pool (TypeORM's query runners, the renewal statements, the
 * migrations) releases it through here.
 */
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
      // pg emits 'error' when the socket fails, even under a running query,
      // and the pool listens only while the client is idle: without this a
      // connection reset during a checkout would crash the process. The query
      // itself fails with the same error.
      const onError = (socketError: Error): void => {
        logger.warn(`Connection lost while in use: ${socketError.message}`);
      };
      client.on('error', onError);
      // A server that refuses writes is a standby now (a failover demoted it), or the session began read-only
      // (default_transaction_read_only): only a new connection can reach the primary, e.g. through HAProxy.
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
        release(releaseError ?? (state ? new UnsafeConnectionError(state) : undefined));
      };
      client.release = guardedRelease;
      callback(undefined, client, guardedRelease);
    });
  }
}

/** The pool TypeORM's Postgres driver holds (a GuardedPool); undefined once the data source is destroyed. */
export function driverPool(dataSource: DataSource): pg.Pool | undefined {
  return (dataSource.driver as unknown as { master?: pg.Pool }).master;
}

/** The pg module as TypeORM's `driver` option, building GuardedPools. */
export const guardedPg = { ...pg, Pool: GuardedPool };
