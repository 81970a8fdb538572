import { randomBytes } from 'node:crypto';
import { DataSource, DataSourceOptions, QueryRunner } from 'typeorm';
import { loadConfig } from '../src/config/load-config';
import { buildDataSourceOptions } from '../src/database/data-source-options';

/**
 * The entities are the schema as TypeScript sees it; the migrations are the
 * schema as it is built. These tests keep the two equal. TypeORM's own
 * comparison ignores an index's WHERE clause and column order and a foreign
 * key's columns, so the entities are also created in a scratch schema and
 * the two catalogues compared whole. The scratch schema lives in a
 * transaction that is rolled back: other test files never see it.
 */
describe('the entities describe the migrated schema exactly', () => {
  const config = loadConfig();
  const options = buildDataSourceOptions(config.database, config.database.url!) as Extract<
    DataSourceOptions,
    { type: 'postgres' }
  >;
  let dataSource: DataSource;

  beforeAll(async () => {
    dataSource = await new DataSource(options).initialize();
  });

  afterAll(async () => {
    await dataSource.destroy();
  });

  it("leaves TypeORM's schema builder nothing to change after the migrations", async () => {
    const { upQueries } = await dataSource.driver.createSchemaBuilder().log();

    expect(upQueries.map((query) => query.query)).toEqual([]);
  });

  it('creates, in an empty schema, the catalogue the migrations created: columns, keys, indexes and their predicates', async () => {
    const scratch = `entity_check_${randomBytes(6).toString('hex')}`;
    const scratchSource = await new DataSource({
      ...options,
      schema: scratch,
      extra: { ...options.extra, max: 1 },
    }).initialize();
    const runner = dataSource.createQueryRunner();
    try {
      const { upQueries } = await scratchSource.driver.createSchemaBuilder().log();
      await runner.startTransaction();
      try {
        await runner.query(`CREATE SCHEMA ${scratch}`);
        for (const query of upQueries) await runner.query(query.query, query.parameters);

        const built = await catalogue(runner, scratch);
        const migrated = await catalogue(runner, 'public');

        expect(built.columns).toEqual(migrated.columns);
        expect(built.constraints).toEqual(migrated.constraints);
        expect(built.indexes).toEqual(migrated.indexes);
        // What TypeORM cannot express: room left in each page so renewals stay heap-only updates, and
        // autovacuum asked to come sooner to the tables retention deletes from.
        expect(built.storage).toEqual([]);
        expect(migrated.storage).toEqual([
          { table: 'consumers', options: ['fillfactor=70'] },
          { table: 'dead_letters', options: ['autovacuum_vacuum_scale_factor=0.05'] },
          {
            table: 'messages',
            options: ['autovacuum_vacuum_scale_factor=0.02', 'autovacuum_vacuum_insert_scale_factor=0.05'],
          },
        ]);
      } finally {
        await runner.rollbackTransaction();
      }
    } finally {
      await runner.release();
      await scratchSource.destroy();
    }
  });
});

interface Catalogue {
  columns: unknown[];
  constraints: unknown[];
  indexes: unknown[];
  storage: Array<{ table: string; options: string[] }>;
}

/** One schema's tables as text, with the schema's name taken out so two schemas compare equal. */
async function catalogue(runner: QueryRunner, schema: string): Promise<Catalogue> {
  const unqualified = (text: string): string => text.split(`${schema}.`).join('');
  const tables = `c.relnamespace = '${schema}'::regnamespace AND c.relkind = 'r' AND c.relname <> 'migrations'`;
  const columns: Array<{ default: string | null }> = await runner.query(
    `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
            a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default,
            a.attidentity AS identity, a.attgenerated AS generated
       FROM pg_class c
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
      WHERE ${tables}
      ORDER BY 1, 2`,
  );
  const constraints: Array<{ table: string; name: string; definition: string }> = await runner.query(
    `SELECT c.relname AS table, k.conname AS name, pg_get_constraintdef(k.oid) AS definition
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
      WHERE ${tables}
      ORDER BY 1, 2`,
  );
  const indexes: Array<{ table: string; name: string; definition: string }> = await runner.query(
    `SELECT c.relname AS table, i.relname AS name, pg_get_indexdef(i.oid) AS definition
       FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
      WHERE ${tables}
      ORDER BY 1, 2`,
  );
  const storage = await runner.query(
    `SELECT c.relname AS table, c.reloptions AS options FROM pg_class c WHERE ${tables} AND c.reloptions IS NOT NULL ORDER BY 1`,
  );
  return {
    // TypeORM quotes a number default, which PostgreSQL keeps as '0'::bigint where the migrations' 0 is kept as 0: the same value.
    columns: columns.map((row) => ({ ...row, default: row.default?.replace(/^'(-?\d+)'::bigint$/, '$1') ?? null })),
    constraints: constraints.map((row) => ({ ...row, definition: unqualified(row.definition) })),
    indexes: indexes.map((row) => ({ ...row, definition: unqualified(row.definition) })),
    storage,
  };
}
