import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Traces consumers record on a message (POST /api/v1/traces), gone with their message: a foreign key with ON DELETE
 * CASCADE from traces to messages, so the statements that delete messages (retention, a message or queue delete, a
 * clear, a move to the dead-letter queue) need not know about them; the cascade is one index probe per deleted
 * message.
 *
 * trace_names holds one row per (trace, name) for the by-name listing; trace_name_messages one per (name, message),
 * which is what a name's message count counts; trace_name_totals one per name, so the names listing reads one row per
 * name, never the traces. Inserts add to them; a trigger on traces takes away what a delete removed, once per
 * statement: PostgreSQL gathers every row the cascades of one statement delete into its transition table. A trigger
 * per row would update a name's totals once per trace, and a row updated thousands of times in one transaction
 * grows a chain each update walks.
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
        CONSTRAINT pk_trace_names PRIMARY KEY (tenant_id, name, created_at, trace_id)
      )`);
    await queryRunner.query(`
      CREATE TABLE trace_name_messages (
        tenant_id    uuid        NOT NULL,
        name         text        NOT NULL,
        partition_id uuid        NOT NULL,
        message_seq  bigint      NOT NULL,
        traces       integer     NOT NULL,
        last_seen    timestamptz NOT NULL,
        CONSTRAINT pk_trace_name_messages PRIMARY KEY (tenant_id, name, partition_id, message_seq)
      )`);
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
    // Totals rows are locked in key order, as inserts take them, before any is changed. A statement that deleted
    // no trace (the cascade of a message that had none) ends at once.
    await queryRunner.query(`
      CREATE FUNCTION leasehold_traces_gone() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM gone) THEN
          RETURN NULL;
        END IF;
        DELETE FROM trace_names n
         USING (SELECT g.tenant_id, g.id, g.created_at, x.name
                  FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)) g
         WHERE n.tenant_id = g.tenant_id AND n.name = g.name AND n.created_at = g.created_at AND n.trace_id = g.id;
        PERFORM 1 FROM trace_name_totals t
          JOIN (SELECT DISTINCT g.tenant_id, x.name FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)) l
            ON t.tenant_id = l.tenant_id AND t.name = l.name
         ORDER BY t.tenant_id, t.name
           FOR UPDATE OF t;
        WITH counted AS (
          UPDATE trace_name_messages m SET traces = m.traces - l.traces
            FROM (SELECT g.tenant_id, x.name, g.partition_id, g.message_seq, count(*)::int AS traces
                 FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)
                GROUP BY 1, 2, 3, 4) l
           WHERE m.tenant_id = l.tenant_id AND m.name = l.name AND m.partition_id = l.partition_id
             AND m.message_seq = l.message_seq
          RETURNING m.tenant_id, m.name, l.traces AS lost, CASE WHEN m.traces <= 0 THEN 1 ELSE 0 END AS emptied
        )
        UPDATE trace_name_totals t SET trace_count = t.trace_count - c.lost, message_count = t.message_count - c.emptied
          FROM (SELECT tenant_id, name, sum(lost) AS lost, sum(emptied) AS emptied FROM counted GROUP BY 1, 2) c
         WHERE t.tenant_id = c.tenant_id AND t.name = c.name;
        DELETE FROM trace_name_messages m
         USING (SELECT g.tenant_id, x.name, g.partition_id, g.message_seq, count(*)::int AS traces
                 FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)
                GROUP BY 1, 2, 3, 4) l
         WHERE m.tenant_id = l.tenant_id AND m.name = l.name AND m.partition_id = l.partition_id
           AND m.message_seq = l.message_seq AND m.traces <= 0;
        DELETE FROM trace_name_totals t
         USING (SELECT DISTINCT g.tenant_id, x.name FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)) l
         WHERE t.tenant_id = l.tenant_id AND t.name = l.name AND t.message_count <= 0;
        UPDATE trace_name_totals t
           SET last_seen = (SELECT max(m.last_seen) FROM trace_name_messages m
                             WHERE m.tenant_id = t.tenant_id AND m.name = t.name)
          FROM (SELECT DISTINCT g.tenant_id, x.name FROM gone g CROSS JOIN LATERAL unnest(g.trace_names) AS x(name)) l
         WHERE t.tenant_id = l.tenant_id AND t.name = l.name;
        RETURN NULL;
      END
      $$`);
    await queryRunner.query(`
      CREATE TRIGGER trg_traces_gone AFTER DELETE ON traces
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION leasehold_traces_gone()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE traces');
    await queryRunner.query('DROP FUNCTION leasehold_traces_gone()');
    await queryRunner.query('DROP TABLE trace_name_totals');
    await queryRunner.query('DROP TABLE trace_name_messages');
    await queryRunner.query('DROP TABLE trace_names');
  }
}
