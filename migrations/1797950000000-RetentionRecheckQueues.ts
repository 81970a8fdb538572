import { MigrationInterface, QueryRunner } from 'typeorm';
import { dropInvalidIndex } from '../src/database/invalid-index';

/**
 * A queue whose retention settings change has its partitions looked at again by the retention job, a batch per
 * statement (queues.retention_recheck_from), instead of by one UPDATE of every partition inside the configure
 * request, which at a million partitions ran past the statement timeout. Adding a nullable column takes no rewrite;
 * the partial index, empty at first, is built CONCURRENTLY.
 */
export class RetentionRecheckQueues1797950000000 implements MigrationInterface {
  name = 'RetentionRecheckQueues1797950000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE queues ADD COLUMN IF NOT EXISTS retention_recheck_from text');
    await dropInvalidIndex(queryRunner, 'idx_queues_retention_recheck');
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_queues_retention_recheck
         ON queues (tenant_id, id) WHERE retention_recheck_from IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_queues_retention_recheck');
    await queryRunner.query('ALTER TABLE queues DROP COLUMN IF EXISTS retention_recheck_from');
  }
}
