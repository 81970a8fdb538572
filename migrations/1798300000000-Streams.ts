import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The server side of Queen's streaming SDK: registered queries and the state their cycles keep, per tenant. A query
 * goes with its source queue and its state with the query (cascades); state is not tied to a partition row, so a
 * window left open on a partition that retention removed while empty is still there to flush. New tables only.
 */
export class Streams1798300000000 implements MigrationInterface {
  name = 'Streams1798300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS stream_queries (
        tenant_id        uuid        NOT NULL,
        id               uuid        NOT NULL,
        name             text        NOT NULL,
        source_queue_id  uuid        NOT NULL,
        sink_queue       text,
        config_hash      text        NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_stream_queries PRIMARY KEY (tenant_id, id),
        CONSTRAINT uq_stream_queries_name UNIQUE (tenant_id, name),
        CONSTRAINT fk_stream_queries_queue FOREIGN KEY (tenant_id, source_queue_id)
          REFERENCES queues (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query(
      'CREATE INDEX IF NOT EXISTS idx_stream_queries_queue ON stream_queries (tenant_id, source_queue_id)',
    );
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS stream_state (
        tenant_id     uuid        NOT NULL,
        query_id      uuid        NOT NULL,
        partition_id  uuid        NOT NULL,
        key           text        NOT NULL,
        value         jsonb       NOT NULL,
        updated_at    timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_stream_state PRIMARY KEY (tenant_id, query_id, partition_id, key),
        CONSTRAINT fk_stream_state_query FOREIGN KEY (tenant_id, query_id)
          REFERENCES stream_queries (tenant_id, id) ON DELETE CASCADE
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE IF EXISTS stream_state');
    await queryRunner.query('DROP TABLE IF EXISTS stream_queries');
  }
}
