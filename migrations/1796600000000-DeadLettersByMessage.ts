import { MigrationInterface, QueryRunner } from 'typeorm';

/** A message's dead letters, found from the message: its status in a listing, its retry, its deletion. */
export class DeadLettersByMessage1796600000000 implements MigrationInterface {
  name = 'DeadLettersByMessage1796600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE INDEX idx_dead_letters_message ON dead_letters (tenant_id, partition_id, transaction_id)',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP INDEX idx_dead_letters_message');
  }
}
