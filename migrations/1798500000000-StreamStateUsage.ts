import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Stream state counts toward the tenant's storage quotas like its messages: each entry is one stored entry and its key
 * and value's bytes. The size is kept per row so that deleting a query, a reset or the source queue's deletion frees
 * what was counted without measuring values again. Entries made before this count from now on.
 */
export class StreamStateUsage1798500000000 implements MigrationInterface {
  name = 'StreamStateUsage1798500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE stream_state ADD COLUMN IF NOT EXISTS bytes integer NOT NULL DEFAULT 0');
    await queryRunner.query(`
      WITH sized AS (
        UPDATE stream_state SET bytes = octet_length(key) + octet_length(value::text) WHERE bytes = 0
        RETURNING tenant_id, bytes
      )
      INSERT INTO tenant_usage AS u (tenant_id, stripe, stored_bytes, stored_messages)
      SELECT tenant_id, 0, sum(bytes), count(*) FROM sized GROUP BY tenant_id ORDER BY tenant_id
      ON CONFLICT (tenant_id, stripe) DO UPDATE
         SET stored_bytes = u.stored_bytes + excluded.stored_bytes,
             stored_messages = u.stored_messages + excluded.stored_messages`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // A counter is the sum of its stripes: taking the state off stripe 0 is right whichever stripes added it.
    await queryRunner.query(`
      INSERT INTO tenant_usage AS u (tenant_id, stripe, stored_bytes, stored_messages)
      SELECT tenant_id, 0, -sum(bytes), -count(*) FROM stream_state GROUP BY tenant_id ORDER BY tenant_id
      ON CONFLICT (tenant_id, stripe) DO UPDATE
         SET stored_bytes = u.stored_bytes + excluded.stored_bytes,
             stored_messages = u.stored_messages + excluded.stored_messages`);
    await queryRunner.query('ALTER TABLE stream_state DROP COLUMN IF EXISTS bytes');
  }
}
