import { randomUUID } from 'node:crypto';
import { StreamStateUsage1798500000000 } from '../migrations/1798500000000-StreamStateUsage';
import { useScratchRunner } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';

/** The migration that counts stream state toward the storage quotas, over state kept before it, in a database of its own. */
(onEmbeddedDatabase ? describe.skip : describe)('migration StreamStateUsage', () => {
  const migration = new StreamStateUsage1798500000000();
  const scratch = useScratchRunner('leasehold_stream_state_usage');

  const usage = async (tenant: string) =>
    (
      await scratch.runner.query(
        `SELECT COALESCE(sum(stored_bytes), 0)::int AS bytes, COALESCE(sum(stored_messages), 0)::int AS entries
           FROM tenant_usage WHERE tenant_id = $1`,
        [tenant],
      )
    )[0];

  it('counts the state each tenant already keeps, bytes and entries, and down() takes it away again', async () => {
    const tenant = randomUUID();
    const [queueId, queryId] = [randomUUID(), randomUUID()];
    await migration.down(scratch.runner);
    await scratch.runner.query("INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, 'src')", [tenant, queueId]);
    await scratch.runner.query(
      `INSERT INTO stream_queries (tenant_id, id, name, source_queue_id, config_hash) VALUES ($1, $2, 'q', $3, 'h')`,
      [tenant, queryId, queueId],
    );
    await scratch.runner.query(
      `INSERT INTO tenant_usage (tenant_id, stripe, stored_bytes, stored_messages) VALUES ($1, 0, 60, 1), ($1, 3, 40, 1)`,
      [tenant],
    );
    for (const [key, value] of [
      ['k1', '{"acc": 1}'],
      ['clé', '"é"'],
    ]) {
      await scratch.runner.query(
        `INSERT INTO stream_state (tenant_id, query_id, partition_id, key, value) VALUES ($1, $2, $3, $4, $5)`,
        [tenant, queryId, randomUUID(), key, value],
      );
    }

    await migration.up(scratch.runner);

    const stateBytes = 2 + 10 + 4 + 4;
    expect(await usage(tenant)).toEqual({ bytes: 100 + stateBytes, entries: 4 });
    const rows = await scratch.runner.query('SELECT key, bytes FROM stream_state WHERE tenant_id = $1 ORDER BY key', [
      tenant,
    ]);
    expect(rows).toEqual([
      { key: 'clé', bytes: 8 },
      { key: 'k1', bytes: 12 },
    ]);

    await migration.down(scratch.runner);
    expect(await usage(tenant)).toEqual({ bytes: 100, entries: 2 });
    await migration.up(scratch.runner);
    expect(await usage(tenant)).toEqual({ bytes: 100 + stateBytes, entries: 4 });
  });
});
