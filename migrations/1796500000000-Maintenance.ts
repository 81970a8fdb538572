import { MigrationInterface, QueryRunner } from 'typeorm';

/** Per tenant: whether its pushes and its pops are paused. Absent means neither. */
export class Maintenance1796500000000 implements MigrationInterface {
  name = 'Maintenance1796500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE maintenance (
        tenant_id uuid NOT NULL,
        pushes_paused boolean NOT NULL DEFAULT false,
        pops_paused boolean NOT NULL DEFAULT false,
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_maintenance PRIMARY KEY (tenant_id)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE maintenance');
  }
}
