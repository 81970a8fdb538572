import { randomUUID } from 'node:crypto';
import { StoredUsage1797500000000 } from '../migrations/1797500000000-StoredUsage';
import { useScratchRunner } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';

/**
 * The migration that starts the stored usage counters, down and up again over rows stored without them, in a
 * scratch database of its own: the shared one's other test files must never see tenant_usage go away.
 */
(onEmbeddedDatabase ? describe.skip : describe)('migration StoredUsage', () => {
  const migration = new StoredUsage1797500000000();
  const scratch = useScratchRunner('leasehold_stored_usage');

  /** A queue with one partition, its messages' payloads and one dead letter per message, written by hand. */
  async function storeFor(tenant: string, payloads: string[], measured: boolean): Promise<void> {
    const queueId = randomUUID();
    const partitionId = randomUUID();
    await scratch.runner.query("INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, 'q')", [tenant, queueId]);
    await scratch.runner.query(
      "INSERT INTO partitions (tenant_id, id, queue_id, name) VALUES ($1, $2, $3, 'Default')",
      [tenant, partitionId, queueId],
    );
    for (const [index, payload] of payloads.entries()) {
      // Rows from before the push measured its payloads have no payload_bytes: they count as their text.
      await scratch.runner.query(
        `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, payload_bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          tenant,
          partitionId,
          index + 1,
          randomUUID(),
          `t${index}`,
          payload,
          measured ? Buffer.byteLength(payload) : null,
        ],
      );
      await scratch.runner.query(
        `INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq, transaction_id,
                                   payload, message_created_at, retry_count)
         VALUES ($1, $2, $3, $4, 'g', $2, $5, $6, $7, now(), 0)`,
        [tenant, randomUUID(), queueId, partitionId, index + 1, `t${index}`, payload],
      );
    }
  }

  const usage = async (tenant: string) =>
    (
      await scratch.runner.query(
        `SELECT sum(stored_bytes)::int AS bytes, sum(stored_messages)::int AS messages
           FROM tenant_usage WHERE tenant_id = $1`,
        [tenant],
      )
    )[0];

  const catalogue = async () =>
    (
      await scratch.runner.query(
        `SELECT to_regclass('tenant_usage') IS NOT NULL AS counters,
                to_regproc('leasehold_storage_quota_exceeded') IS NOT NULL AS refusal,
                EXISTS (SELECT 1 FROM information_schema.columns
                         WHERE table_name = 'dead_letters' AND column_name = 'payload_bytes') AS letter_bytes`,
      )
    )[0];

  it('counts what each tenant already stores, messages and dead letters, and down() takes it all away again', async () => {
    const measured = randomUUID();
    const unmeasured = randomUUID();
    await migration.down(scratch.runner);
    expect(await catalogue()).toEqual({ counters: false, refusal: false, letter_bytes: false });
    await storeFor(measured, ['{"n":1}', '"é"'], true);
    await storeFor(unmeasured, ['[1,2,3]'], false);

    await migration.up(scratch.runner);

    expect(await catalogue()).toEqual({ counters: true, refusal: true, letter_bytes: true });
    // An unmeasured payload counts as the text its column keeps, whichever JSON type that is.
    const [{ type }] = await scratch.runner.query(
      `SELECT data_type AS type FROM information_schema.columns
        WHERE table_name = 'dead_letters' AND column_name = 'payload'`,
    );
    const sized = async (text: string) =>
      (await scratch.runner.query(`SELECT octet_length($1::${type}::text) AS n`, [text]))[0].n as number;
    const letters = (await sized('{"n":1}')) + (await sized('"é"'));
    expect(await usage(measured)).toEqual({ bytes: 7 + 4 + letters, messages: 4 });
    expect(await usage(unmeasured)).toEqual({ bytes: 2 * (await sized('[1,2,3]')), messages: 2 });

    await migration.down(scratch.runner);
    expect(await catalogue()).toEqual({ counters: false, refusal: false, letter_bytes: false });
    await migration.up(scratch.runner);
    expect(await usage(unmeasured)).toEqual({ bytes: 2 * (await sized('[1,2,3]')), messages: 2 });
  });
});
