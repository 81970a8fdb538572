import { Client, PoolClient } from 'pg';

/**
 * A session of its own on the test database, outside the broker's pool: a
 * blocker holding row locks, or an observer reading pg_stat_activity (a
 * snapshot per transaction, so never the blocker's).
 */
export async function openSession(connectionString = process.env.DATABASE_URL): Promise<Client> {
  const session = new Client({ connectionString });
  await session.connect();
  return session;
}

/** Opens a transaction on `blocker` holding every row of the tenant in `table` until it rolls back. */
export async function lockTenantRows(
  blocker: Client,
  table: 'consumers' | 'partitions',
  tenantId: string,
): Promise<void> {
  await blocker.query('BEGIN');
  await blocker.query(`SELECT 1 FROM ${table} WHERE tenant_id = $1 FOR UPDATE`, [tenantId]);
}

/** The server process behind a connection: the same pid is the same session, reused. */
export async function backendPidOf(client: Client | PoolClient): Promise<number> {
  return (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
}

/** Counts the protocol messages of one kind a connection receives (a ReadyForQuery ends each round trip). */
export function countMessages(
  client: Client | PoolClient,
  message: 'readyForQuery' | 'rowDescription',
): { readonly count: number; stop(): void } {
  const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
  let count = 0;
  const onMessage = (): void => void (count += 1);
  connection.on(message, onMessage);
  return {
    get count() {
      return count;
    },
    stop: () => void connection.removeListener(message, onMessage),
  };
}
