import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Traces consumers record on a message (POST /api/v1/traces), gone with their message: a foreign key with ON DELETE
 * CASCADE from every table below to messages, so the statements that delete messages (retention, a message or queue
 * delete, a clear) need not know about them. Each cascade is an index probe per deleted message.
 *
 * trace_names holds one row per (trace, name) for the by-name listing; trace_name_messages one per (name, message),
 * which is what a name's message count counts; trace_name_totals one per name, so the names listing reads one row per
 * name, never the traces. Inserts add to the totals; a trigger takes a message's share away when its row of
 * trace_name_messages goes (a cascade cannot run a statement of ours).
 */
export class Traces1798200000000 implements MigrationInterface {
  name = 'Traces1798200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE traces (
        tenant_id      uuid        NOT NULL,
        id             uuid        NOT NULL,
        partition_id   uuid        NOT NULL,
        message_seq    bigint      NOT NULL,
        event_type     text        NOT NULL,
        data           json        NOT NULL,
        consumer_group text        NOT NULL,
        worker_id      text        NOT NULL,
        trace_names    text[]      NOT NULL,
        created_at     timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_traces PRIMARY KEY (tenant_id, id),
        CONSTRAINT fk_traces_message FOREIGN KEY (tenant_id, partition_id, message_seq)
          REFERENCES messages (tenant_id, partition_id, seq) ON DELETE CASCADE
      )`);
    // The cascade's probe, and a message's traces oldest first.
    await queryRunner.query(
      'CREATE INDEX idx_traces_message ON traces (tenant_id, partition_id, message_seq, created_at)',
    );
    await queryRunner.query(`
      CREATE TABLE trace_names (
        tenant_id  uuid        NOT NULL,
        name       text        NOT NULL,
        created_at timestamptz NOT NULL,
        trace_id   uuid        NOT NULL,
        CONSTRAINT pk_trace_names PRIMARY KEY (tenant_id, name, created_at, trace_id),
        CONSTRAINT fk_trace_names_trace FOREIGN KEY (tenant_id, trace_id)
          REFERENCES traces (tenant_id, id) ON DELETE CASCADE
      )`);
    await queryRunner.query('CREATE INDEX idx_trace_names_trace ON trace_names (tenant_id, trace_id)');
    await queryRunner.query(`
      CREATE TABLE trace_name_messages (
        tenant_id    uuid        NOT NULL,
        name         text        NOT NULL,
        partition_id uuid        NOT NULL,
        message_seq  bigint      NOT NULL,
        traces       integer     NOT NULL,
        last_seen    timestamptz NOT NULL,
        CONSTRAINT pk_trace_name_messages PRIMARY KEY (tenant_id, name, partition_id, message_seq),
        CONSTRAINT fk_trace_name_messages_message FOREIGN KEY (tenant_id, partition_id, message_seq)
          REFERENCES messages (tenant_id, partition_id, seq) ON DELETE CASCADE
      )`);
    await queryRunner.query(
      'CREATE INDEX idx_trace_name_messages_message ON trace_name_messages (tenant_id, partition_id, message_seq)',
    );
    await queryRunner.query(
      'CREATE INDEX idx_trace_name_messages_seen ON trace_name_messages (tenant_id, name, last_seen)',
    );
    await queryRunner.query(`
      CREATE TABLE trace_name_totals (
        tenant_id     uuid        NOT NULL,
        name          text        NOT NULL,
        trace_count   bigint      NOT NULL,
        message_count bigint      NOT NULL,
        last_seen     timestamptz NOT NULL,
        CONSTRAINT pk_trace_name_totals PRIMARY KEY (tenant_id, name)
      )`);
    await queryRunner.query(
      'CREATE INDEX idx_trace_name_totals_seen ON trace_name_totals (tenant_id, last_seen, name)',
    );
    // Per row, so that only messages that had traces with names pay for it; last_seen falls back to the newest left.
    await queryRunner.query(`
      CREATE FUNCTION leasehold_trace_name_message_gone() RETURNS trigger
      LANGUAGE plpgsql AS $$
      DECLARE
        left_messages bigint;
      BEGIN
        UPDATE trace_name_totals t
           SET trace_count = t.trace_count - OLD.traces,
               message_count = t.message_count - 1,
               last_seen = COALESCE((SELECT max(x.last_seen) FROM trace_name_messages x
                                      WHERE x.tenant_id = OLD.tenant_id AND x.name = OLD.name), t.last_seen)
         WHERE t.tenant_id = OLD.tenant_id AND t.name = OLD.name
        RETURNING t.message_count INTO left_messages;
        IF left_messages <= 0 THEN
          DELETE FROM trace_name_totals WHERE tenant_id = OLD.tenant_id AND name = OLD.name;
        END IF;
        RETURN NULL;
      END
      $$`);
    await queryRunner.query(`
      CREATE TRIGGER trg_trace_name_messages_gone AFTER DELETE ON trace_name_messages
        FOR EACH ROW EXECUTE FUNCTION leasehold_trace_name_message_gone()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE trace_name_totals');
    await queryRunner.query('DROP TABLE trace_name_messages');
    await queryRunner.query('DROP FUNCTION leasehold_trace_name_message_gone()');
    await queryRunner.query('DROP TABLE trace_names');
    await queryRunner.query('DROP TABLE traces');
  }
}
