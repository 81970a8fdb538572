import type { ClientBase, PoolConfig } from 'pg';
import { DatabaseConfig } from '../config/app-config';
import { workBudgetMs } from './deadline';
import { SESSION_SETTINGS } from './session-settings';

/** pg-pool awaits onConnect before it hands the connection out; its types say void. */
type BrokerPoolConfig = Omit<PoolConfig, 'onConnect'> & { onConnect: (client: ClientBase) => Promise<unknown> };

/** The broker's pool, shared with the migration CLI (data-source.ts) so the two never drift apart. */
export function poolConfig(database: DatabaseConfig, url: string): BrokerPoolConfig {
  return {
    connectionString: url,
    max: database.poolSize,
    // Opening one connection, not waiting for one: the runner bounds that wait by DB_ACQUIRE_TIMEOUT_MS, and a
    // connection that opens after its request gave up joins the pool for the next, even where opening takes longer.
    connectionTimeoutMillis: database.connectTimeoutMs,
    statement_timeout: database.statementTimeoutMs,
    // Else a session whose broker died mid-transaction holds its row locks until TCP gives up on it.
    idle_in_transaction_session_timeout: workBudgetMs(database),
    // Backstop for statements outside a TransactionRunner (boot, migrations).
    query_timeout: workBudgetMs(database),
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    idleTimeoutMillis: 30_000,
    application_name: 'leasehold',
    // Awaited by the pool before it hands a new connection out; a failure closes it and fails that acquire.
    onConnect: (client: ClientBase) => client.query(SESSION_SETTINGS),
  };
}
