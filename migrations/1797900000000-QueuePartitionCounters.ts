import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each queue's partitions and the sum of their last offsets, kept beside its stored messages (queue_stored) by the
 * statements that create and remove partitions and push, so that listings and maxSize no longer read every partition
 * row of a queue. The first counts are one pass over the partitions; stop the brokers of the previous version first.
 */
export class QueuePartitionCounters1797900000000 implements MigrationInterface {
  name = 'QueuePartitionCounters1797900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE queue_stored ADD COLUMN partitions bigint NOT NULL DEFAULT 0,
                                                   ADD COLUMN offsets bigint NOT NULL DEFAULT 0`);
    await queryRunner.query(`
      INSERT INTO queue_stored AS s (tenant_id, queue_id, stripe, messages, partitions, offsets)
      SELECT tenant_id, queue_id, 0, 0, count(*), sum(last_offset) FROM partitions GROUP BY tenant_id, queue_id
      ON CONFLICT (tenant_id, queue_id, stripe) DO UPDATE
         SET partitions = s.partitions + excluded.partitions, offsets = s.offsets + excluded.offsets`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE queue_stored DROP COLUMN offsets, DROP COLUMN partitions');
  }
}
