import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The size of each message's payload as stored JSON text, written by the
 * push, so a pop can bound its answer in bytes without converting every
 * candidate payload to text first. Nullable and without a default, so adding
 * it rewrites nothing; rows written before it are measured when read.
 */
export class MessagePayloadBytes1796091820254 implements MigrationInterface {
  name = 'MessagePayloadBytes1796091820254';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE messages ADD COLUMN payload_bytes integer');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE messages DROP COLUMN payload_bytes');
  }
}
