import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import { canRollBack } from './guarded-pool';

/**
 * What the connected server is, learnt once at boot, and the only place that
 * adapts statements to it. The embedded PGlite socket server interleaves the
 * protocol messages of statements that run outside a transaction on
 * different connections, so there even single statements get a transaction.
 */
@Injectable()
export class DatabaseEngine implements OnModuleInit {
  private embedded = false;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The embedded database: one broker process, and statements outside a transaction need care. */
  get isEmbedded(): boolean {
    return this.embedded;
  }

  async onModuleInit(): Promise<void> {
    const [row]: Array<{ version: string }> = await this.dataSource.query('SELECT version() AS version');
    this.embedded = row.version.includes('PGlite');
  }

  /**
   * Runs one statement, outside any transaction, on a connection checked out
   * of the pool, and keeps it whole: on PostgreSQL it is sent as it is (a
   * named statement is prepared once per connection); on the embedded
   * database it runs unnamed, since every connection shares one session, and
   * inside an explicit transaction. Not async, so the PostgreSQL path costs
   * no extra promise.
   */
  runWhole<R extends QueryResultRow>(client: PoolClient, statement: QueryConfig): Promise<QueryResult<R>> {
    if (!this.embedded) return client.query<R>(statement);
    return this.runInTransaction<R>(client, statement);
  }

  private async runInTransaction<R extends QueryResultRow>(
    client: PoolClient,
    statement: QueryConfig,
  ): Promise<QueryResult<R>> {
    await client.query('BEGIN');
    try {
      const result = await client.query<R>({ text: statement.text, values: statement.values });
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (canRollBack(client, error)) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  /**
   * Runs a hot statement of a transaction as a named prepared statement on
   * the transaction's own connection, so it is parsed (and, once PostgreSQL
   * settles on a generic plan, planned) once per connection instead of on
   * every call. On the embedded database, one shared session in which every
   * pooled connection would prepare the same name, it runs unnamed.
   */
  async prepared<T = any>(manager: EntityManager, name: string, text: string, values: unknown[]): Promise<T[]> {
    const runner = manager.queryRunner;
    if (this.embedded || !runner) return manager.query(text, values);
    const client = (await runner.connect()) as PoolClient;
    try {
      return (await client.query({ name, text, values })).rows as T[];
    } catch (error) {
      throw asQueryFailed(text, values, error);
    }
  }
}

/**
 * A statement the server refused, sent on the driver's client, as
 * manager.query fails: callers tell a refused statement from a lost database
 * one way, whichever way it was sent.
 */
export function asQueryFailed(text: string, values: unknown[] | undefined, error: unknown): unknown {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'string'
    ? new QueryFailedError(text, values, error)
    : error;
}
