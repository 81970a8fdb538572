import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import { canRollBack } from './guarded-pool';
import { queryNamed, queryTogether } from './pipelined-query';

/**
 * The embedded PGlite socket server interleaves the protocol messages of statements that run outside a
 * transaction on different connections, so there even single statements get a transaction.
 */
@Injectable()
export class DatabaseEngine implements OnModuleInit {
  private embedded = false;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  get isEmbedded(): boolean {
    return this.embedded;
  }

  async onModuleInit(): Promise<void> {
    const [row]: Array<{ version: string }> = await this.dataSource.query('SELECT version() AS version');
    this.embedded = row.version.includes('PGlite');
  }

  /** Named on PostgreSQL (described once per connection); unnamed on the embedded database (one shared session). */
  runWhole<R extends QueryResultRow>(client: PoolClient, statement: QueryConfig): Promise<QueryResult<R>> {
    if (!this.embedded) return queryNamed<R>(client, statement);
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

  /** Named, so it is parsed (and, on a generic plan, planned) once per connection; unnamed on the embedded database. */
  async prepared<T = any>(manager: EntityManager, name: string, text: string, values: unknown[]): Promise<T[]> {
    const runner = manager.queryRunner;
    if (this.embedded || !runner) return manager.query(text, values);
    const client = (await runner.connect()) as PoolClient;
    try {
      return (await queryNamed(client, { name, text, values })).rows as T[];
    } catch (error) {
      throw asQueryFailed(text, values, error);
    }
  }

  /** A statement's rows: prepared when it has a name, as `prepared`; sent unnamed through the manager otherwise. */
  rows(manager: EntityManager, { name, text, values }: QueryConfig & { values: unknown[] }): Promise<unknown[]> {
    return name === undefined ? manager.query(text, values) : this.prepared(manager, name, text, values);
  }

  /** Prepared statements whose parameters do not depend on each other's results, in one round trip on PostgreSQL. */
  async preparedTogether(
    manager: EntityManager,
    statements: ReadonlyArray<QueryConfig & { values: unknown[] }>,
  ): Promise<unknown[][]> {
    const runner = manager.queryRunner;
    if (this.embedded || !runner) {
      const results: unknown[][] = [];
      for (const { text, values } of statements) results.push(await manager.query(text, values));
      return results;
    }
    const client = (await runner.connect()) as PoolClient;
    try {
      return (await queryTogether(client, statements)).map((result) => result.rows as unknown[]);
    } catch (error) {
      throw asQueryFailed(statements.map(({ text }) => text).join(';\n'), undefined, error);
    }
  }
}

/** As manager.query fails, so callers tell a refused statement from a lost database however it was sent. */
export function asQueryFailed(text: string, values: unknown[] | undefined, error: unknown): unknown {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'string'
    ? new QueryFailedError(text, values, error)
    : error;
}
