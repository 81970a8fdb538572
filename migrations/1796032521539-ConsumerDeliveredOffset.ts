import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The highest offset ever handed to a consumer group in a partition. A claim
 * that starts at or below it is a redelivery: it repeats only messages that
 * were delivered before (with deliveryAttempt increased) and leaves newer
 * messages to a fresh batch. Releasing a lease clears lease_end_offset, so
 * this cannot be derived from the lease columns.
 */
export class ConsumerDeliveredOffset1796032521539 implements MigrationInterface {
  name = 'ConsumerDeliveredOffset1796032521539';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN delivered_offset bigint NOT NULL DEFAULT 0');
    await queryRunner.query(
      'UPDATE consumers SET delivered_offset = GREATEST(committed_offset, COALESCE(lease_end_offset, 0))',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN delivered_offset');
  }
}
