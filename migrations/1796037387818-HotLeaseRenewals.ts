import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Lets a lease renewal be a HOT update (heap-only tuple: no index entry
 * written). A renewal changes only lease_expires_at, but that column was an
 * INCLUDE column of idx_consumers_lease, so every renewal wrote a new entry
 * into both indexes of consumers. Without it, and with free space left in
 * each page (fillfactor) for the new row version, PostgreSQL can keep the
 * update on the page. Liveness is checked on the heap row, which the
 * renewal locks and updates anyway.
 */
export class HotLeaseRenewals1796037387818 implements MigrationInterface {
  name = 'HotLeaseRenewals1796037387818';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX idx_consumers_lease');
    await queryRunner.query(
      'CREATE INDEX idx_consumers_lease ON consumers (tenant_id, lease_id) WHERE lease_id IS NOT NULL',
    );
    await queryRunner.query('ALTER TABLE consumers SET (fillfactor = 70)');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE consumers RESET (fillfactor)');
    await queryRunner.query('DROP INDEX idx_consumers_lease');
    await queryRunner.query(
      'CREATE INDEX idx_consumers_lease ON consumers (tenant_id, lease_id) INCLUDE (lease_expires_at) WHERE lease_id IS NOT NULL',
    );
  }
}
