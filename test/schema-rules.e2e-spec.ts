import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { sql } from './support/db-state';
import { createTestApp } from './support/test-app';

/**
 * The rules that let the schema be distributed by tenant (Citus, with
 * tenant_id as every table's distribution column; docs/deployment.md),
 * checked against the catalogue the migrations produced: a new table, index
 * or key that breaks one fails here, not on the day of the move.
 */
const DISTRIBUTED_TABLES = [
  'consumer_groups',
  'consumers',
  'dead_letters',
  'group_lag',
  'maintenance',
  'messages',
  'partitions',
  'queue_history',
  'queue_stored',
  'queues',
  'retention_rechecks',
  'stream_queries',
  'stream_state',
  'tenant_encryption_keys',
  'tenant_history',
  'tenant_usage',
  'trace_name_messages',
  'trace_name_totals',
  'trace_names',
  'traces',
];

/** Tables of the deployment, not of a tenant: they stay on the coordinator, like the migrations ledger. */
const LOCAL_TABLES = ['brokers'];

describe('the migrated schema can be distributed by tenant', () => {
  let app: NestExpressApplication;
  let dataSource: Database;

  beforeAll(async () => {
    app = await createTestApp();
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  it('every table but the migrations ledger and the local tables is one of the distributed tables, with a NOT NULL uuid tenant_id', async () => {
    const tables = await sql<Array<{ table: string; type: string | null; nullable: string | null }>>(
      dataSource,
      `SELECT t.tablename AS table, c.data_type AS type, c.is_nullable AS nullable
         FROM pg_tables t
         LEFT JOIN information_schema.columns c
           ON c.table_schema = t.schemaname AND c.table_name = t.tablename AND c.column_name = 'tenant_id'
        WHERE t.schemaname = 'public' AND t.tablename <> 'migrations' AND t.tablename <> ALL($1::text[])
        ORDER BY t.tablename`,
      [LOCAL_TABLES],
    );

    expect(tables).toEqual(DISTRIBUTED_TABLES.map((table) => ({ table, type: 'uuid', nullable: 'NO' })));
  });

  it("every index, primary key and unique key begins with tenant_id, so each lookup stays on one tenant's shard", async () => {
    const indexes = await sql<Array<{ index: string; first: string }>>(
      dataSource,
      `SELECT i.indexrelid::regclass::text AS index, a.attname AS first
         FROM pg_index i
         JOIN pg_class t ON t.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
        WHERE n.nspname = 'public' AND t.relname = ANY($1::text[])
        ORDER BY 1`,
      [DISTRIBUTED_TABLES],
    );

    expect(indexes.length).toBeGreaterThanOrEqual(DISTRIBUTED_TABLES.length);
    expect(indexes.filter((index) => index.first !== 'tenant_id')).toEqual([]);
  });

  it('every foreign key joins on tenant_id first, on both sides, so rows it links are co-located', async () => {
    const keys = await sql<Array<{ key: string; local: string; remote: string; target: string }>>(
      dataSource,
      `SELECT c.conname AS key, la.attname AS local, ra.attname AS remote, c.confrelid::regclass::text AS target
         FROM pg_constraint c
         JOIN pg_attribute la ON la.attrelid = c.conrelid AND la.attnum = c.conkey[1]
         JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]
        WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
        ORDER BY 1`,
    );

    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => key.local !== 'tenant_id' || key.remote !== 'tenant_id')).toEqual([]);
    expect(keys.filter((key) => !DISTRIBUTED_TABLES.includes(key.target))).toEqual([]);
  });

  it('no foreign key reaches a local table, which a shard could not see', async () => {
    const keys = await sql<Array<{ key: string }>>(
      dataSource,
      `SELECT conname AS key FROM pg_constraint
        WHERE contype = 'f' AND connamespace = 'public'::regnamespace
          AND (conrelid::regclass::text = ANY($1::text[]) OR confrelid::regclass::text = ANY($1::text[]))`,
      [LOCAL_TABLES],
    );

    expect(keys).toEqual([]);
  });
});
