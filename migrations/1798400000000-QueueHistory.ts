import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Minute buckets of what happened to each queue and each tenant, for the console's charts: added to once a minute per
 * broker from the counts it kept in memory, never computed by scanning messages. A queue's rows go with it (cascade);
 * a tenant's stay, as the record of what it did. The retention job deletes both past HISTORY_RETENTION_DAYS, oldest
 * first, tenant by tenant (every index begins with tenant_id, as the schema rules want). New tables only.
 */
export class QueueHistory1798400000000 implements MigrationInterface {
  name = 'QueueHistory1798400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS queue_history (
        tenant_id      uuid        NOT NULL,
        queue_id       uuid        NOT NULL,
        minute         timestamptz NOT NULL,
        pushed         bigint      NOT NULL DEFAULT 0,
        popped         bigint      NOT NULL DEFAULT 0,
        acked          bigint      NOT NULL DEFAULT 0,
        dead_lettered  bigint      NOT NULL DEFAULT 0,
        max_wait_ms    bigint,
        lag            bigint,
        CONSTRAINT pk_queue_history PRIMARY KEY (tenant_id, queue_id, minute),
        CONSTRAINT fk_queue_history_queue FOREIGN KEY (tenant_id, queue_id)
          REFERENCES queues (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query('CREATE INDEX IF NOT EXISTS idx_queue_history_minute ON queue_history (tenant_id, minute)');
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS tenant_history (
        tenant_id      uuid        NOT NULL,
        minute         timestamptz NOT NULL,
        pushed         bigint      NOT NULL DEFAULT 0,
        popped         bigint      NOT NULL DEFAULT 0,
        acked          bigint      NOT NULL DEFAULT 0,
        dead_lettered  bigint      NOT NULL DEFAULT 0,
        max_wait_ms    bigint,
        CONSTRAINT pk_tenant_history PRIMARY KEY (tenant_id, minute)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE IF EXISTS tenant_history');
    await queryRunner.query('DROP TABLE IF EXISTS queue_history');
  }
}
