import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The whole broker's schema. Every primary and unique key starts with
 * tenant_id, so the tables can later be distributed by tenant (e.g. Citus)
 * without rewriting a statement.
 */
export class InitialSchema1796031809241 implements MigrationInterface {
  name = 'InitialSchema1796031809241';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE queues (
        tenant_id         uuid        NOT NULL,
        id                uuid        NOT NULL,
        name              text        NOT NULL,
        lease_time        integer     NOT NULL DEFAULT 60,
        retry_limit       integer     NOT NULL DEFAULT 3,
        dead_letter_queue boolean     NOT NULL DEFAULT true,
        options           jsonb       NOT NULL DEFAULT '{}'::jsonb,
        created_at        timestamptz NOT NULL DEFAULT now(),
        updated_at        timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_queues PRIMARY KEY (tenant_id, id),
        CONSTRAINT uq_queues_name UNIQUE (tenant_id, name)
      )`);
    await queryRunner.query(`
      CREATE TABLE partitions (
        tenant_id   uuid        NOT NULL,
        id          uuid        NOT NULL,
        queue_id    uuid        NOT NULL,
        name        text        NOT NULL,
        last_offset bigint      NOT NULL DEFAULT 0,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_partitions PRIMARY KEY (tenant_id, id),
        CONSTRAINT uq_partitions_name UNIQUE (tenant_id, queue_id, name),
        CONSTRAINT fk_partitions_queue FOREIGN KEY (tenant_id, queue_id)
          REFERENCES queues (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query(`
      CREATE TABLE messages (
        tenant_id      uuid        NOT NULL,
        partition_id   uuid        NOT NULL,
        seq            bigint      NOT NULL,
        id             uuid        NOT NULL,
        transaction_id text        NOT NULL,
        trace_id       text,
        payload        jsonb,
        producer_sub   text,
        created_at     timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_messages PRIMARY KEY (tenant_id, partition_id, seq),
        CONSTRAINT uq_messages_transaction UNIQUE (tenant_id, partition_id, transaction_id),
        CONSTRAINT fk_messages_partition FOREIGN KEY (tenant_id, partition_id)
          REFERENCES partitions (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query(`
      CREATE TABLE consumer_groups (
        tenant_id         uuid        NOT NULL,
        queue_id          uuid        NOT NULL,
        name              text        NOT NULL,
        subscription_from timestamptz,
        created_at        timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_consumer_groups PRIMARY KEY (tenant_id, queue_id, name),
        CONSTRAINT fk_consumer_groups_queue FOREIGN KEY (tenant_id, queue_id)
          REFERENCES queues (tenant_id, id) ON DELETE CASCADE
      )`);
    // One row per (partition, consumer group): the group's cursor in that
    // partition and the single lease that may be live on it.
    await queryRunner.query(`
      CREATE TABLE consumers (
        tenant_id        uuid        NOT NULL,
        partition_id     uuid        NOT NULL,
        consumer_group   text        NOT NULL,
        committed_offset bigint      NOT NULL DEFAULT 0,
        lease_end_offset bigint,
        lease_id         uuid,
        lease_expires_at timestamptz,
        retry_count      integer     NOT NULL DEFAULT 0,
        delivery_attempt integer     NOT NULL DEFAULT 0,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_consumers PRIMARY KEY (tenant_id, partition_id, consumer_group),
        CONSTRAINT fk_consumers_partition FOREIGN KEY (tenant_id, partition_id)
          REFERENCES partitions (tenant_id, id) ON DELETE CASCADE
      )`);
    // Serves lease renewal and leased acks. Partial: only rows holding a lease
    // are indexed, so the index stays as small as the set of live consumers.
    await queryRunner.query(`
      CREATE INDEX idx_consumers_lease ON consumers (tenant_id, lease_id)
        INCLUDE (lease_expires_at) WHERE lease_id IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE dead_letters (
        tenant_id          uuid        NOT NULL,
        id                 uuid        NOT NULL,
        queue_id           uuid        NOT NULL,
        partition_id       uuid        NOT NULL,
        consumer_group     text        NOT NULL,
        message_id         uuid        NOT NULL,
        seq                bigint      NOT NULL,
        transaction_id     text        NOT NULL,
        trace_id           text,
        payload            jsonb,
        producer_sub       text,
        message_created_at timestamptz NOT NULL,
        error_message      text,
        retry_count        integer     NOT NULL DEFAULT 0,
        created_at         timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_dead_letters PRIMARY KEY (tenant_id, id),
        CONSTRAINT fk_dead_letters_queue FOREIGN KEY (tenant_id, queue_id)
          REFERENCES queues (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query(`
      CREATE INDEX idx_dead_letters_queue ON dead_letters (tenant_id, queue_id, consumer_group, created_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE dead_letters');
    await queryRunner.query('DROP TABLE consumers');
    await queryRunner.query('DROP TABLE consumer_groups');
    await queryRunner.query('DROP TABLE messages');
    await queryRunner.query('DROP TABLE partitions');
    await queryRunner.query('DROP TABLE queues');
  }
}
