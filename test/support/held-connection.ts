import type { PoolClient } from 'pg';
import { Database } from '../../src/database/database';

/** One of the broker's pooled connections, taken and held by a test (to hold locks, or to leave the pool empty). */
export class HeldConnection {
  private client?: PoolClient;

  constructor(private readonly database: Database) {}

  async connect(): Promise<void> {
    this.client ??= await this.database.pool.connect();
  }

  async query<T = any>(text: string, values?: unknown[]): Promise<T[]> {
    await this.connect();
    return (await this.client!.query(text, values)).rows as T[];
  }

  async startTransaction(): Promise<void> {
    await this.query('BEGIN');
  }

  async commitTransaction(): Promise<void> {
    await this.query('COMMIT');
  }

  async rollbackTransaction(): Promise<void> {
    await this.query('ROLLBACK');
  }

  get isTransactionActive(): boolean {
    const status = this.client?.getTransactionStatus();
    return status === 'T' || status === 'E';
  }

  async release(): Promise<void> {
    this.client?.release();
    this.client = undefined;
  }
}
