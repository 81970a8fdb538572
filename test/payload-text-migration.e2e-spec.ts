import { randomUUID } from 'node:crypto';
import { PayloadText1797050000000 } from '../migrations/1797050000000-PayloadText';
import { useScratchRunner } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';

/**
 * The migration that keeps payloads as JSON text, down and up again over rows, in a scratch database of its own:
 * the shared one's other test files must never see its columns change type.
 */
(onEmbeddedDatabase ? describe.skip : describe)('migration PayloadText', () => {
  const migration = new PayloadText1797050000000();
  const tenant = randomUUID();
  const queueId = randomUUID();
  const partitionId = randomUUID();
  const scratch = useScratchRunner('leasehold_payload_text');

  beforeAll(async () => {
    await scratch.runner.query("INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, 'q')", [tenant, queueId]);
    await scratch.runner.query(
      "INSERT INTO partitions (tenant_id, id, queue_id, name) VALUES ($1, $2, $3, 'Default')",
      [tenant, partitionId, queueId],
    );
  });

  const types = async () =>
    (
      await scratch.runner.query(
        `SELECT table_name, data_type FROM information_schema.columns
          WHERE table_schema = 'public' AND column_name = 'payload' ORDER BY table_name`,
      )
    ).map((row: { table_name: string; data_type: string }) => `${row.table_name}: ${row.data_type}`);

  async function store(seq: number, payload: string): Promise<void> {
    await scratch.runner.query(
      `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload) VALUES ($1, $2, $3, $4, $5, $6)`,
      [tenant, partitionId, seq, randomUUID(), `t${seq}`, payload],
    );
    await scratch.runner.query(
      `INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq, transaction_id,
                                 payload, message_created_at, retry_count)
       VALUES ($1, $2, $3, $4, 'g', $2, $5, $6, $7, now(), 0)`,
      [tenant, randomUUID(), queueId, partitionId, seq, `t${seq}`, payload],
    );
  }

  const stored = async () =>
    scratch.runner.query(
      `SELECT m.payload::text AS message, m.payload_bytes AS bytes, d.payload::text AS letter
         FROM messages m JOIN dead_letters d ON d.tenant_id = m.tenant_id AND d.transaction_id = m.transaction_id
        WHERE m.tenant_id = $1 ORDER BY m.seq`,
      [tenant],
    );

  it('turns jsonb rows into json holding their jsonb text, measured, and back; a number jsonb cannot hold becomes text', async () => {
    expect(await types()).toEqual(['dead_letters: json', 'messages: json']);
    await migration.down(scratch.runner);
    expect(await types()).toEqual(['dead_letters: jsonb', 'messages: jsonb']);
    await store(1, '{"b":1, "a":2, "a":3}');

    await migration.up(scratch.runner);

    expect(await types()).toEqual(['dead_letters: json', 'messages: json']);
    expect(await stored()).toEqual([{ message: '{"a": 3, "b": 1}', bytes: 16, letter: '{"a": 3, "b": 1}' }]);
    await store(2, '{"b":1,"a":[1.50,-0]}');
    await store(3, '[1e200000]');

    await migration.down(scratch.runner);

    expect(await types()).toEqual(['dead_letters: jsonb', 'messages: jsonb']);
    expect((await stored()).map((row: { message: string; letter: string }) => [row.message, row.letter])).toEqual([
      ['{"a": 3, "b": 1}', '{"a": 3, "b": 1}'],
      ['{"a": [1.50, 0], "b": 1}', '{"a": [1.50, 0], "b": 1}'],
      ['"[1e200000]"', '"[1e200000]"'],
    ]);
    await migration.up(scratch.runner);
    expect(await types()).toEqual(['dead_letters: json', 'messages: json']);
  });
});
