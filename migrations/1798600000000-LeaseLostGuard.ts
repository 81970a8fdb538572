import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Raised by a transaction's last check that its required leases are still held, sent in the COMMIT's round trip: a
 * lease that ran out during the transaction rolls everything back there, instead of costing every transaction a
 * round trip of its own to look.
 */
export class LeaseLostGuard1798600000000 implements MigrationInterface {
  name = 'LeaseLostGuard1798600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION leasehold_lease_lost(lease uuid) RETURNS boolean
      LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION USING ERRCODE = 'LL001', MESSAGE = 'a required lease is no longer held', DETAIL = lease::text;
      END
      $$`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP FUNCTION IF EXISTS leasehold_lease_lost(uuid)');
  }
}
