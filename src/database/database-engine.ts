import { Injectable, OnModuleInit } from '@nestjs/common';
import type { PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { Database, inTransaction, queryEach, queryRows } from './database';
import { QueryFailedError } from './query-failed-error';
import { queryNamed, queryTogether } from './pipelined-query';

/**
 * The embedded PGlite socket server interleaves the protocol messages of statements that run outside a
 * transaction on different connections, so there even single statements get a transaction.
 */
@Injectable()
export class DatabaseEngine implements OnModuleInit {
  private embedded = false;

  constructor(private readonly database: Database) {}

  get isEmbedded(): boolean {
    return this.embedded;
  }

  async onModuleInit(): Promise<void> {
    const [row]: Array<{ version: string }> = await this.database.query('SELECT version() AS version');
    this.embedded = row.version.includes('PGlite');
  }

  /** Named on PostgreSQL (described once per connection); unnamed on the embedded database (one shared session). */
  runWhole<R extends QueryResultRow>(client: PoolClient, statement: QueryConfig): Promise<QueryResult<R>> {
    if (!this.embedded) return queryNamed<R>(client, statement);
    return inTransaction(client, () => client.query<R>({ text: statement.text, values: statement.values }));
  }

  /** Named, so it is parsed (and, on a generic plan, planned) once per connection; unnamed on the embedded database. */
  async prepared<T = any>(client: PoolClient, name: string, text: string, values: unknown[]): Promise<T[]> {
    if (this.embedded) return queryRows<T>(client, text, values);
    try {
      return (await queryNamed(client, { name, text, values })).rows as T[];
    } catch (error) {
      throw asQueryFailed(text, values, error);
    }
  }

  /** A statement's rows: prepared when it has a name, as `prepared`; sent unnamed otherwise. */
  rows(client: PoolClient, { name, text, values }: QueryConfig & { values: unknown[] }): Promise<unknown[]> {
    return name === undefined ? queryRows(client, text, values) : this.prepared(client, name, text, values);
  }

  /** Prepared statements whose parameters do not depend on each other's results, in one round trip on PostgreSQL. */
  async preparedTogether(
    client: PoolClient,
    statements: ReadonlyArray<QueryConfig & { values: unknown[] }>,
  ): Promise<unknown[][]> {
    if (this.embedded) return queryEach(client, statements);
    try {
      return (await queryTogether(client, statements)).map((result) => result.rows as unknown[]);
    } catch (error) {
      throw asQueryFailed(statements.map(({ text }) => text).join(';\n'), undefined, error);
    }
  }
}

/** As queryRows fails, so callers tell a refused statement from a lost database however it was sent. */
export function asQueryFailed(text: string, values: unknown[] | undefined, error: unknown): unknown {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'string'
    ? new QueryFailedError(text, values, error)
    : error;
}
