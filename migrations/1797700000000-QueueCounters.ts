import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each consumer group's lag and each queue's stored messages, kept as counters by the statements that move cursors
 * and store or delete messages (src/consumer-groups/counters.ts), so that /metrics and the listings read a few rows
 * per queue instead of summing every partition at every scrape.
 *
 * The first counts are taken here, in one pass over the cursors and one over the messages, in the migration's
 * transaction: writes wait for the locks these reads take only as far as the new tables go (they did not exist
 * before). Stop the brokers of the previous version first: they move cursors and store messages without counting.
 */
export class QueueCounters1797700000000 implements MigrationInterface {
  name = 'QueueCounters1797700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE group_lag (
        tenant_id uuid NOT NULL,
        queue_id uuid NOT NULL,
        consumer_group text NOT NULL,
        stripe smallint NOT NULL,
        lag bigint NOT NULL DEFAULT 0,
        CONSTRAINT pk_group_lag PRIMARY KEY (tenant_id, queue_id, consumer_group, stripe)
      )`);
    await queryRunner.query(`
      CREATE TABLE queue_stored (
        tenant_id uuid NOT NULL,
        queue_id uuid NOT NULL,
        stripe smallint NOT NULL,
        messages bigint NOT NULL DEFAULT 0,
        CONSTRAINT pk_queue_stored PRIMARY KEY (tenant_id, queue_id, stripe)
      )`);
    await queryRunner.query(`
      INSERT INTO group_lag (tenant_id, queue_id, consumer_group, stripe, lag)
      SELECT c.tenant_id, c.queue_id, c.consumer_group, 0, sum(p.last_offset - c.committed_offset)
        FROM consumers c
        JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
       GROUP BY c.tenant_id, c.queue_id, c.consumer_group`);
    await queryRunner.query(`
      INSERT INTO queue_stored (tenant_id, queue_id, stripe, messages)
      SELECT p.tenant_id, p.queue_id, 0, count(*)
        FROM messages m
        JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
       GROUP BY p.tenant_id, p.queue_id`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE queue_stored');
    await queryRunner.query('DROP TABLE group_lag');
  }
}
