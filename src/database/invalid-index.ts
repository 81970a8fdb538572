import type { MigrationRunner } from './run-migrations';

/**
 * For a migration that builds an index CONCURRENTLY: a build that failed half-way leaves an invalid index behind,
 * which CREATE INDEX IF NOT EXISTS would then keep. Dropped, the next attempt builds it again.
 */
export async function dropInvalidIndex(queryRunner: MigrationRunner, name: string): Promise<void> {
  const invalid = await queryRunner.query<unknown>(
    `SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1 AND NOT i.indisvalid`,
    [name],
  );
  if (invalid.length > 0) await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}
