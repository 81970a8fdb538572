import { MigrationInterface, QueryRunner } from 'typeorm';
import { dropInvalidIndex } from '../src/database/invalid-index';

/** Cursors per statement of the one-time pass over existing cursors: each commits on its own, holding locks briefly. */
const BATCH = 10_000;

/**
 * The retention job looks at a partition when something there may have become deletable, not on a timer per
 * partition: `partitions.retention_check_at` carries only what time alone makes deletable (pending retention,
 * eviction, completed retention once every group is past the oldest message, an empty partition's grace), and a
 * cursor that moved since the job last looked at its partition (`committed_offset > retention_seen`) is found
 * through a partial index. A group deleted leaves its partitions in `retention_rechecks`, since deleting the cursor
 * that held messages back moves no other cursor.
 *
 * Runs outside a transaction: the index is built CONCURRENTLY and existing cursors are marked seen in batches in
 * key order, so pushes, pops and acks go on meanwhile on a table of millions of cursors. Partitions keep the checks
 * the previous version set, each of which still comes (the previous version always counted completed retention in),
 * so marking existing cursors seen loses nothing.
 */
export class RetentionDue1797800000000 implements MigrationInterface {
  name = 'RetentionDue1797800000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN IF NOT EXISTS retention_seen bigint NOT NULL DEFAULT 0');
    await queryRunner.query(
      `CREATE TABLE IF NOT EXISTS retention_rechecks (
         tenant_id uuid NOT NULL,
         partition_id uuid NOT NULL,
         CONSTRAINT pk_retention_rechecks PRIMARY KEY (tenant_id, partition_id)
       )`,
    );
    let after: { tenant_id: string; partition_id: string; consumer_group: string } | undefined;
    for (;;) {
      const rows = (await queryRunner.query(
        `WITH batch AS (
           SELECT c.tenant_id, c.partition_id, c.consumer_group FROM consumers c
            WHERE ($1::uuid IS NULL OR (c.tenant_id, c.partition_id, c.consumer_group) > ($1, $2, $3))
            ORDER BY c.tenant_id, c.partition_id, c.consumer_group
            LIMIT ${BATCH}
         ), seen AS (
           UPDATE consumers c SET retention_seen = c.committed_offset
             FROM batch b
            WHERE c.tenant_id = b.tenant_id AND c.partition_id = b.partition_id AND c.consumer_group = b.consumer_group
              AND c.retention_seen < c.committed_offset
         )
         SELECT tenant_id, partition_id, consumer_group FROM batch
          ORDER BY tenant_id DESC, partition_id DESC, consumer_group DESC LIMIT 1`,
        [after?.tenant_id ?? null, after?.partition_id ?? null, after?.consumer_group ?? null],
      )) as Array<{ tenant_id: string; partition_id: string; consumer_group: string }>;
      if (rows.length === 0) break;
      after = rows[0];
    }
    await dropInvalidIndex(queryRunner, 'idx_consumers_retention_moved');
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_consumers_retention_moved
         ON consumers (tenant_id, partition_id) WHERE committed_offset > retention_seen`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_consumers_retention_moved');
    await queryRunner.query('DROP TABLE IF EXISTS retention_rechecks');
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN IF EXISTS retention_seen');
  }
}
