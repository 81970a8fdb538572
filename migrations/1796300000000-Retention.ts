import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention: per-queue settings (null means the broker's default); per
 * partition, when it last took a message (an empty partition is removed a
 * grace period after that) and when the retention job should next look at
 * it (null: nothing to do until a push). Dead letters are found by age.
 *
 * Nullable columns and constant or stable defaults are catalogue-only
 * changes that rewrite no rows: every existing partition reads "look now".
 * messages and dead_letters churn: autovacuum is asked to come sooner than
 * its 20 % default (docs/retention.md).
 */
export class Retention1796300000000 implements MigrationInterface {
  name = 'Retention1796300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE queues
        ADD COLUMN retention_enabled boolean,
        ADD COLUMN retention_seconds integer,
        ADD COLUMN completed_retention_seconds integer,
        ADD COLUMN max_wait_time_seconds integer,
        ADD COLUMN max_size integer,
        ADD COLUMN dlq_retention_seconds integer`);
    await queryRunner.query(`
      ALTER TABLE partitions
        ADD COLUMN last_pushed_at timestamptz NOT NULL DEFAULT now(),
        ADD COLUMN retention_check_at timestamptz DEFAULT now()`);
    await queryRunner.query(
      `CREATE INDEX idx_partitions_retention_check ON partitions (tenant_id, retention_check_at)
        WHERE retention_check_at IS NOT NULL`,
    );
    await queryRunner.query('CREATE INDEX idx_dead_letters_created ON dead_letters (tenant_id, created_at)');
    await queryRunner.query(
      'ALTER TABLE messages SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05)',
    );
    await queryRunner.query('ALTER TABLE dead_letters SET (autovacuum_vacuum_scale_factor = 0.05)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE dead_letters RESET (autovacuum_vacuum_scale_factor)');
    await queryRunner.query(
      'ALTER TABLE messages RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor)',
    );
    await queryRunner.query('DROP INDEX idx_dead_letters_created');
    await queryRunner.query('DROP INDEX idx_partitions_retention_check');
    await queryRunner.query('ALTER TABLE partitions DROP COLUMN retention_check_at, DROP COLUMN last_pushed_at');
    await queryRunner.query(`
      ALTER TABLE queues
        DROP COLUMN dlq_retention_seconds,
        DROP COLUMN max_size,
        DROP COLUMN max_wait_time_seconds,
        DROP COLUMN completed_retention_seconds,
        DROP COLUMN retention_seconds,
        DROP COLUMN retention_enabled`);
  }
}
