import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import { DataSource, EntityManager } from 'typeorm';

/**
 * What the connected server is, learnt once at boot. The embedded PGlite
 * socket server interleaves the protocol messages of statements that run
 * outside a transaction on different connections, so code that may run
 * concurrently wraps even single statements in a transaction there.
 */
@Injectable()
export class DatabaseEngine implements OnModuleInit {
  private embedded = false;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    const [row]: Array<{ version: string }> = await this.dataSource.query('SELECT version() AS version');
    this.embedded = row.version.includes('PGlite');
  }

  /** True when single statements need an explicit transaction to stay whole. */
  get needsExplicitTransactions(): boolean {
    return this.embedded;
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
    return (await client.query({ name, text, values })).rows as T[];
  }
}
