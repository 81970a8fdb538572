import { MigrationInterface, QueryRunner } from 'typeorm';

/** What the console shows of a live lease: how often it was renewed, when, and how close to expiry. */
export class LeaseRenewals1796800000000 implements MigrationInterface {
  name = 'LeaseRenewals1796800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE consumers ADD COLUMN lease_renewals integer NOT NULL DEFAULT 0,
                             ADD COLUMN lease_renewed_at timestamptz,
                             ADD COLUMN lease_renewal_slack_ms integer`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE consumers DROP COLUMN lease_renewals, DROP COLUMN lease_renewed_at, DROP COLUMN lease_renewal_slack_ms',
    );
  }
}
