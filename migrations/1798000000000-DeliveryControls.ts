import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The delivery controls Queen's clients send: dlqAfterMaxRetries, retryDelay and ttl in columns of their own, and the
 * instant before which a nacked cursor is not claimed again. Each column is added with a constant default or none,
 * which PostgreSQL records without rewriting the table, so the migration is quick on millions of cursors. Values of
 * these options stored in `options` before they were in force are dropped rather than moved: turning them on at an
 * upgrade would start expiring or holding back messages nobody asked to.
 */
export class DeliveryControls1798000000000 implements MigrationInterface {
  name = 'DeliveryControls1798000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE queues
        ADD COLUMN IF NOT EXISTS dlq_after_max_retries boolean NOT NULL DEFAULT false,
        ADD COLUMN IF NOT EXISTS retry_delay_ms integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS ttl_seconds integer`);
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN IF NOT EXISTS retry_at timestamptz');
    await queryRunner.query(
      `UPDATE queues SET options = options - 'dlqAfterMaxRetries' - 'retryDelay' - 'ttl'
        WHERE options ?| ARRAY['dlqAfterMaxRetries', 'retryDelay', 'ttl']`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN IF EXISTS retry_at');
    await queryRunner.query(
      'ALTER TABLE queues DROP COLUMN IF EXISTS dlq_after_max_retries, DROP COLUMN IF EXISTS retry_delay_ms, ' +
        'DROP COLUMN IF EXISTS ttl_seconds',
    );
  }
}
