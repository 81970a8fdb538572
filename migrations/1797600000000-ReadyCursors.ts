import { MigrationInterface, QueryRunner } from 'typeorm';
import { dropInvalidIndex } from '../src/database/invalid-index';
import { subscriptionStartOffset } from '../src/consumer-groups/subscription-start';

/** Rows per statement of the one-time pass over existing cursors: each commits on its own, holding locks briefly. */
const BATCH = 10_000;

/**
 * Claims find the partitions a group can take through a partial index of the cursors marked `ready` (work may be
 * there), instead of walking every cursor of the group, drained ones included, in the order they were last used.
 * Pushes mark a drained cursor ready; only an ack or claim that moves a cursor to its partition's end, holding the
 * partition's row share-locked so that no push can be adding to it, unmarks one.
 *
 * Cursors are created when they are first needed, not for every partition × group: a push creates them for the
 * groups of its partitions that have none, and a new group looks through the queue's partitions by name
 * (`backfill_from`, the last name looked at; null when there is nothing left to look at) a few thousand at a time,
 * as its pops go, creating cursors only where it has something to read.
 *
 * Runs outside a transaction: the indexes are built CONCURRENTLY and existing cursors are marked in batches, so
 * pushes, pops and acks go on meanwhile on a table of millions of cursors. Stop the brokers of the previous version
 * first: they push without marking cursors ready.
 */
export class ReadyCursors1797600000000 implements MigrationInterface {
  name = 'ReadyCursors1797600000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN IF NOT EXISTS ready boolean NOT NULL DEFAULT true');
    await queryRunner.query('ALTER TABLE consumer_groups ADD COLUMN IF NOT EXISTS backfill_from text');
    await dropInvalidIndex(queryRunner, 'idx_consumers_ready');
    await dropInvalidIndex(queryRunner, 'idx_consumers_group');
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_consumers_ready
         ON consumers (tenant_id, queue_id, consumer_group, updated_at, partition_id) WHERE ready`,
    );
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_consumers_group
         ON consumers (tenant_id, queue_id, consumer_group, partition_id)`,
    );
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_consumers_claim');
    // Drained cursors were created ready; unmark them, a batch at a time, as an ack would.
    for (;;) {
      const marked = (await queryRunner.query(
        `WITH drained AS (
           SELECT c.tenant_id, c.partition_id, c.consumer_group FROM consumers c
             JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
            WHERE c.ready AND p.last_offset <= c.committed_offset
              AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= clock_timestamp())
            LIMIT ${BATCH}
              FOR UPDATE OF c SKIP LOCKED
         ), unmarked AS (
           -- As src/consumer-groups/cursor-ready.ts decides it, written out: a migration does not change with the code.
           UPDATE consumers c SET ready = NOT EXISTS (
                    SELECT 1 FROM partitions rp
                     WHERE rp.tenant_id = c.tenant_id AND rp.id = c.partition_id AND rp.last_offset <= c.committed_offset
                       FOR SHARE OF rp SKIP LOCKED)
             FROM drained d
            WHERE c.tenant_id = d.tenant_id AND c.partition_id = d.partition_id AND c.consumer_group = d.consumer_group
           RETURNING c.ready
         )
         SELECT count(*)::int AS n FROM unmarked WHERE NOT ready`,
      )) as Array<{ n: number }>;
      if (marked[0].n < BATCH) break;
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Every group has a cursor on every partition again, as the claims of the previous version expect.
    await queryRunner.query(
      `INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
       SELECT p.tenant_id, p.queue_id, p.id, g.name, s.start_offset, s.start_offset
         FROM consumer_groups g
         JOIN partitions p ON p.tenant_id = g.tenant_id AND p.queue_id = g.queue_id
        CROSS JOIN LATERAL (SELECT ${subscriptionStartOffset('p', 'g')} AS start_offset) s
       ON CONFLICT (tenant_id, partition_id, consumer_group) DO NOTHING`,
    );
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_consumers_claim
         ON consumers (tenant_id, queue_id, consumer_group, updated_at, partition_id)`,
    );
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_consumers_group');
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_consumers_ready');
    await queryRunner.query('ALTER TABLE consumer_groups DROP COLUMN IF EXISTS backfill_from');
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN IF EXISTS ready');
  }
}
