import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

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
}
