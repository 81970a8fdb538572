import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Fencing and a ceiling on lease length.
 *
 * - lease_epoch counts the claims of a (partition, consumer group): every
 *   claim adds one, so a downstream store can refuse a write carrying an
 *   older epoch than one it has already seen.
 * - lease_deadline is the latest a lease may run to, fixed at its claim
 *   (claim time + LEASE_MAX_TOTAL_SECONDS); null when no ceiling applies.
 *
 * Neither is indexed, so renewals stay heap-only updates; a constant default
 * and a nullable column are catalogue-only changes that rewrite no rows.
 */
export class LeaseFencing1796200000000 implements MigrationInterface {
  name = 'LeaseFencing1796200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0');
    await queryRunner.query('ALTER TABLE consumers ADD COLUMN lease_deadline timestamptz');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN lease_deadline');
    await queryRunner.query('ALTER TABLE consumers DROP COLUMN lease_epoch');
  }
}
