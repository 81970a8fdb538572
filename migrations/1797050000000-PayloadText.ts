import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Payloads kept as the JSON text the producer sent: `json` stores its input
 * verbatim once it is valid, where `jsonb` reorders keys, drops repeated ones
 * and rewrites numbers. Rows stored before keep jsonb's rendering (the sent
 * text is gone), and their payload_bytes becomes that rendering's size.
 */
export class PayloadText1797050000000 implements MigrationInterface {
  name = 'PayloadText1797050000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE messages
        ALTER COLUMN payload TYPE json USING payload::text::json,
        ALTER COLUMN payload_bytes TYPE integer USING octet_length(payload::text)`);
    await queryRunner.query('ALTER TABLE dead_letters ALTER COLUMN payload TYPE json USING payload::text::json');
  }

  /** A payload jsonb cannot hold (a number past numeric's range) goes back as a JSON string of its text. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION pg_temp.leasehold_payload_jsonb(payload json) RETURNS jsonb LANGUAGE plpgsql AS $$
      BEGIN
        RETURN payload::jsonb;
      EXCEPTION WHEN OTHERS THEN
        RETURN to_jsonb(payload::text);
      END $$`);
    await queryRunner.query(
      'ALTER TABLE messages ALTER COLUMN payload TYPE jsonb USING pg_temp.leasehold_payload_jsonb(payload)',
    );
    await queryRunner.query(
      'ALTER TABLE dead_letters ALTER COLUMN payload TYPE jsonb USING pg_temp.leasehold_payload_jsonb(payload)',
    );
    await queryRunner.query('DROP FUNCTION pg_temp.leasehold_payload_jsonb(json)');
  }
}
