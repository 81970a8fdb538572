import { MigrationInterface, QueryRunner } from 'typeorm';
import { subscriptionStartOffset } from '../src/consumer-groups/subscription-start';

/**
 * Pops find the partitions they can claim through an index instead of
 * scanning every partition of the queue. Cursors carry their queue id, and
 * every consumer group has a cursor on every partition of its queue from the
 * moment either exists (created with the group, or with the partition by
 * the push), so a pop no longer creates missing cursors by comparing every
 * partition with every cursor first.
 *
 * The index holds no lease column: renewals change only lease_expires_at
 * and stay heap-only updates (see HotLeaseRenewals).
 *
 * Rewrites every cursor row once; on a large installation run it in a quiet
 * period.
 */
export class EagerCursors1796104437615 implements MigrationInterface {
  name = 'EagerCursors1796104437615';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN queue_id uuid');
    await queryRunner.query(
      `UPDATE consumers c SET queue_id = p.queue_id
         FROM partitions p
        WHERE p.tenant_id = c.tenant_id AND p.id = c.partition_id`,
    );
    await queryRunner.query('ALTER TABLE consumers ALTER COLUMN queue_id SET NOT NULL');
    await queryRunner.query(
      `INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
       SELECT p.tenant_id, p.queue_id, p.id, g.name, s.start_offset, s.start_offset
         FROM consumer_groups g
         JOIN partitions p ON p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id
        CROSS JOIN LATERAL (SELECT ${subscriptionStartOffset('p', 'g')} AS start_offset) s
       ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING`,
    );
    await queryRunner.query(
      'CREATE INDEX idx_consumers_claim ON consumers (tenant_id, queue_id, consumer_group, updated_at, partition_id)',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX idx_consumers_claim');
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN queue_id');
  }
}
