import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What each tenant stores, kept as counters by the statements that add and delete messages and dead letters, so
 * the storage quotas never sum a tenant's rows. A tenant's usage is the sum of its rows in tenant_usage: each
 * transaction adds to one stripe, so concurrent pushes of a tenant rarely wait for each other's counter.
 * dead_letters gets the payload's size as messages have it (null on rows written before: measured when deleted).
 */
export class StoredUsage1797500000000 implements MigrationInterface {
  name = 'StoredUsage1797500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE dead_letters ADD COLUMN payload_bytes integer');
    await queryRunner.query(`
      CREATE TABLE tenant_usage (
        tenant_id uuid NOT NULL,
        stripe smallint NOT NULL,
        stored_bytes bigint NOT NULL DEFAULT 0,
        stored_messages bigint NOT NULL DEFAULT 0,
        CONSTRAINT pk_tenant_usage PRIMARY KEY (tenant_id, stripe)
      )`);
    // Raised by the statement that records a write, so the write and its COMMIT roll back in the same round trip.
    await queryRunner.query(`
      CREATE FUNCTION leasehold_storage_quota_exceeded(quota text, used bigint) RETURNS boolean
      LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION USING ERRCODE = 'LQ001', MESSAGE = 'storage quota exceeded: ' || quota, DETAIL = used::text;
      END
      $$`);
    await queryRunner.query(`
      INSERT INTO tenant_usage (tenant_id, stripe, stored_bytes, stored_messages)
      SELECT tenant_id, 0, sum(bytes), count(*)
        FROM (SELECT tenant_id, COALESCE(payload_bytes, octet_length(payload::text), 0) AS bytes FROM messages
              UNION ALL
              SELECT tenant_id, COALESCE(octet_length(payload::text), 0) FROM dead_letters) stored
       GROUP BY tenant_id`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP FUNCTION leasehold_storage_quota_exceeded(text, bigint)');
    await queryRunner.query('DROP TABLE tenant_usage');
    await queryRunner.query('ALTER TABLE dead_letters DROP COLUMN payload_bytes');
  }
}
