import { MigrationInterface, QueryRunner } from 'typeorm';
import { dropInvalidIndex } from '../src/database/invalid-index';

/**
 * Encryption at rest (docs/operations.md): `queues.encryption_enabled`; `key_id` on messages and dead letters, null
 * for a plain payload, else the id of the key the payload column's sealed text opens with; and
 * `tenant_encryption_keys`, the key ids each tenant's rows may use, so the start-up check and the re-encryption read a
 * small table rather than every message. The partial indexes hold only sealed rows: what the re-encryption walks.
 *
 * Runs outside a transaction: the indexes on messages and dead letters are built CONCURRENTLY, so pushes, pops and
 * acks go on meanwhile; the columns come without a default to write, so adding them rewrites nothing.
 */
export class Encryption1798100000000 implements MigrationInterface {
  name = 'Encryption1798100000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE queues ADD COLUMN IF NOT EXISTS encryption_enabled boolean NOT NULL DEFAULT false',
    );
    await queryRunner.query('ALTER TABLE messages ADD COLUMN IF NOT EXISTS key_id text');
    await queryRunner.query('ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS key_id text');
    await queryRunner.query(
      `CREATE TABLE IF NOT EXISTS tenant_encryption_keys (
         tenant_id   uuid        NOT NULL,
         key_id      text        NOT NULL,
         recorded_at timestamptz NOT NULL DEFAULT now(),
         CONSTRAINT pk_tenant_encryption_keys PRIMARY KEY (tenant_id, key_id)
       )`,
    );
    await queryRunner.query(
      'CREATE INDEX IF NOT EXISTS idx_queues_encrypted ON queues (tenant_id) WHERE encryption_enabled',
    );
    await dropInvalidIndex(queryRunner, 'idx_messages_key');
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_key
         ON messages (tenant_id, key_id, partition_id, seq) WHERE key_id IS NOT NULL`,
    );
    await dropInvalidIndex(queryRunner, 'idx_dead_letters_key');
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_dead_letters_key
         ON dead_letters (tenant_id, key_id, id) WHERE key_id IS NOT NULL`,
    );
  }

  /** Sealed payloads stay sealed text: down is for a database that never stored one. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_dead_letters_key');
    await queryRunner.query('DROP INDEX CONCURRENTLY IF EXISTS idx_messages_key');
    await queryRunner.query('DROP INDEX IF EXISTS idx_queues_encrypted');
    await queryRunner.query('DROP TABLE IF EXISTS tenant_encryption_keys');
    await queryRunner.query('ALTER TABLE dead_letters DROP COLUMN IF EXISTS key_id');
    await queryRunner.query('ALTER TABLE messages DROP COLUMN IF EXISTS key_id');
    await queryRunner.query('ALTER TABLE queues DROP COLUMN IF EXISTS encryption_enabled');
  }
}
