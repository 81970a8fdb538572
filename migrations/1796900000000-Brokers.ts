import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The broker processes of the deployment, each renewing its own row
 * (BrokerRegistry): their count divides the per-tenant limits. Not a
 * tenant's table: it stays on the coordinator if the schema is ever
 * distributed, like the migrations ledger.
 */
export class Brokers1796900000000 implements MigrationInterface {
  name = 'Brokers1796900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE brokers (
        id uuid NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        seen_at timestamptz NOT NULL DEFAULT now(),
        live_until timestamptz NOT NULL,
        CONSTRAINT pk_brokers PRIMARY KEY (id)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE brokers');
  }
}
