import { DatabaseError, PoolClient, QueryConfig } from 'pg';
import type { Database } from './database';
import { DatabaseEngine } from './database-engine';

const STATEMENT: QueryConfig = { name: 'leasehold_renew_one', text: 'SELECT $1::int AS n', values: [1] };

async function engineOn(version: string): Promise<DatabaseEngine> {
  const engine = new DatabaseEngine({ query: async () => [{ version }] } as unknown as Database);
  await engine.onModuleInit();
  return engine;
}

/** A connection recording what it was sent; `fail` makes the statement itself fail, with the connection ready again. */
function connection(fail?: Error): { client: PoolClient; sent: unknown[] } {
  const sent: unknown[] = [];
  const client = {
    readyForQuery: true,
    getTransactionStatus: () => 'T',
    query: jest.fn(async (query: string | QueryConfig) => {
      sent.push(query);
      if (fail && typeof query !== 'string') throw fail;
      return { rows: [{ n: 1 }] };
    }),
  } as unknown as PoolClient;
  return { client, sent };
}

describe('DatabaseEngine.runWhole', () => {
  it('sends the statement on PostgreSQL as it is, named, as one query of its own', async () => {
    const engine = await engineOn('PostgreSQL 15.8 on x86_64-pc-linux-gnu');
    const sent: Array<QueryConfig & { callback(error: Error | null, result: unknown): void }> = [];
    const client = {
      query: jest.fn((query: (typeof sent)[number]) => {
        sent.push(query);
        query.callback(null, { rows: [{ n: 1 }] });
      }),
    } as unknown as PoolClient;

    await expect(engine.runWhole(client, STATEMENT)).resolves.toEqual({ rows: [{ n: 1 }] });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ name: STATEMENT.name, text: STATEMENT.text, values: STATEMENT.values });
  });

  it('runs the statement unnamed inside a transaction on the embedded database', async () => {
    const engine = await engineOn('PostgreSQL 17.5 (PGlite 0.5.14)');
    const { client, sent } = connection();

    await expect(engine.runWhole(client, STATEMENT)).resolves.toEqual({ rows: [{ n: 1 }] });
    expect(sent).toEqual(['BEGIN', { text: STATEMENT.text, values: STATEMENT.values }, 'COMMIT']);
  });

  it('rolls back on the embedded database when the server refused the statement, and rethrows its error', async () => {
    const engine = await engineOn('PostgreSQL 17.5 (PGlite 0.5.14)');
    const refused = new DatabaseError('division by zero', 16, 'error');
    const { client, sent } = connection(refused);

    await expect(engine.runWhole(client, STATEMENT)).rejects.toBe(refused);
    expect(sent).toEqual(['BEGIN', { text: STATEMENT.text, values: STATEMENT.values }, 'ROLLBACK']);
  });

  it('sends no ROLLBACK behind a statement still in flight (a client-side timeout): closing the connection rolls back', async () => {
    const engine = await engineOn('PostgreSQL 17.5 (PGlite 0.5.14)');
    const timeout = new Error('Query read timeout');
    const { client, sent } = connection(timeout);
    (client as unknown as { readyForQuery: boolean }).readyForQuery = false;

    await expect(engine.runWhole(client, STATEMENT)).rejects.toBe(timeout);
    expect(sent).toEqual(['BEGIN', { text: STATEMENT.text, values: STATEMENT.values }]);
  });
});
