import { Client } from 'pg';

/*
 * Large states written by SQL, in the shapes the broker writes them (each scenario checks through HTTP that the
 * broker then behaves as on its own state): pushing a million partitions one by one would take the run's whole time.
 * Ids are time-ordered like the broker's UUIDv7, so the B-trees fill in order as they do under real pushes.
 */

const BATCH = 100_000;
export const QUEUE_MODE = '__QUEUE_MODE__';

/** A deterministic UUID: `family` (a 32-bit number) names the kind of row and the queue, `index` the row. */
export function uuidSql(family: number, index: string): string {
  return `(lpad(to_hex(${family}), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(${index}), 12, '0'))::uuid`;
}

export function uuidOf(family: number, index: number): string {
  return `${family.toString(16).padStart(8, '0')}-0000-7000-8000-${index.toString(16).padStart(12, '0')}`;
}

export interface SeededQueue {
  tenant: string;
  queueId: string;
  queue: string;
  partitions: number;
}

/**
 * A queue of `partitions` partitions `p0000000`..., each holding `messagesPerPartition` messages pushed `ageSeconds`
 * ago; `drained`: the queue-mode group has consumed them all (cursor at the end, not ready), as after push, pop and
 * ack; otherwise no group has cursors there. `groups` more groups still looking through the partitions
 * (`backfill_from` at the last one they looked at) with unread cursors on the first `groupCursors` partitions.
 */
export async function seedQueue(
  client: Client,
  options: {
    family: number;
    tenant: string;
    queue: string;
    partitions: number;
    messagesPerPartition?: number;
    ageSeconds?: number;
    drained?: boolean;
    groups?: number;
    groupCursors?: number;
    /** When the retention job is to look at the partitions first (SQL expression); default: when their messages come of age. */
    retentionCheckAt?: string;
    queueOptions?: { completedRetentionSeconds?: number };
  },
): Promise<SeededQueue> {
  const {
    family,
    tenant,
    queue,
    partitions,
    messagesPerPartition = 1,
    ageSeconds = 600,
    drained = true,
    groups = 0,
    groupCursors = 1000,
    queueOptions = {},
  } = options;
  const queueId = uuidOf(family, 0);
  const created = `now() - make_interval(secs => ${ageSeconds})`;
  const retentionCheckAt =
    options.retentionCheckAt ?? `${created} + make_interval(secs => ${queueOptions.completedRetentionSeconds ?? 3600})`;
  await client.query(
    `INSERT INTO queues (tenant_id, id, name, completed_retention_seconds, created_at, updated_at)
     VALUES ($1, $2, $3, $4, ${created}, ${created})`,
    [tenant, queueId, queue, queueOptions.completedRetentionSeconds ?? null],
  );
  const partitionId = uuidSql(family, 'i');
  for (let from = 1; from <= partitions; from += BATCH) {
    const to = Math.min(partitions, from + BATCH - 1);
    await client.query(
      `INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset, created_at, last_pushed_at, retention_check_at)
       SELECT $1, ${partitionId}, $2, 'p' || lpad(i::text, 7, '0'), $5, ${created}, ${created}, ${retentionCheckAt}
         FROM generate_series($3::int, $4::int) i`,
      [tenant, queueId, from, to, messagesPerPartition],
    );
    if (messagesPerPartition > 0) {
      await client.query(
        `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, created_at, payload_bytes)
         SELECT $1, ${partitionId}, s, ${uuidSql(family + 1, '(i::bigint << 16) + s')},
                ${uuidSql(family + 1, '(i::bigint << 16) + s')}::text, json_build_object('i', i, 's', s),
                ${created}, octet_length(json_build_object('i', i, 's', s)::text)
           FROM generate_series($2::int, $3::int) i, generate_series(1, $4::int) s`,
        [tenant, from, to, messagesPerPartition],
      );
    }
    if (drained) {
      await client.query(
        `INSERT INTO consumers (tenant_id, partition_id, consumer_group, queue_id, committed_offset, delivered_offset,
                                delivery_attempt, lease_epoch, ready, created_at, updated_at)
         SELECT $1, ${partitionId}, '${QUEUE_MODE}', $2, $5, $5, 1, 1, false, ${created}, ${created}
           FROM generate_series($3::int, $4::int) i`,
        [tenant, queueId, from, to, messagesPerPartition],
      );
    }
  }
  if (drained) {
    await client.query(
      `INSERT INTO consumer_groups (tenant_id, queue_id, name, created_at, backfill_from) VALUES ($1, $2, $3, ${created}, NULL)`,
      [tenant, queueId, QUEUE_MODE],
    );
  }
  for (let group = 1; group <= groups; group += 1) {
    const looked = Math.min(partitions, groupCursors);
    const backfillFrom = looked < partitions ? `p${String(looked).padStart(7, '0')}` : null;
    await client.query(
      `INSERT INTO consumer_groups (tenant_id, queue_id, name, created_at, backfill_from) VALUES ($1, $2, $3, ${created}, $4)`,
      [tenant, queueId, `g${group}`, backfillFrom],
    );
    await client.query(
      `INSERT INTO consumers (tenant_id, partition_id, consumer_group, queue_id, committed_offset, delivered_offset,
                              ready, created_at, updated_at)
       SELECT $1, ${partitionId}, $3, $2, 0, 0, true, ${created}, ${created} FROM generate_series(1, $4::int) i`,
      [tenant, queueId, `g${group}`, looked],
    );
  }
  await countersOf(client, tenant, queueId);
  const stored = partitions * messagesPerPartition;
  if (stored > 0) {
    await client.query(
      `INSERT INTO tenant_usage (tenant_id, stripe, stored_bytes, stored_messages)
       SELECT $1, 0, sum(payload_bytes), count(*) FROM messages WHERE tenant_id = $1
       ON CONFLICT (tenant_id, stripe) DO UPDATE SET stored_bytes = EXCLUDED.stored_bytes,
                                                     stored_messages = EXCLUDED.stored_messages`,
      [tenant],
    );
  }
  return { tenant, queueId, queue, partitions };
}

/**
 * The kept counters of lag and stored messages, recounted from the seeded rows as the migration that made them first
 * counts them (a broker without them skips this): the writes keep them from then on.
 */
async function countersOf(client: Client, tenant: string, queueId: string): Promise<void> {
  const { rows } = await client.query<{ kept: boolean }>("SELECT to_regclass('group_lag') IS NOT NULL AS kept");
  if (!rows[0].kept) return;
  await client.query('DELETE FROM group_lag WHERE tenant_id = $1 AND queue_id = $2', [tenant, queueId]);
  await client.query('DELETE FROM queue_stored WHERE tenant_id = $1 AND queue_id = $2', [tenant, queueId]);
  await client.query(
    `INSERT INTO group_lag (tenant_id, queue_id, consumer_group, stripe, lag)
     SELECT c.tenant_id, c.queue_id, c.consumer_group, 0, sum(p.last_offset - c.committed_offset)
       FROM consumers c
       JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
      WHERE c.tenant_id = $1 AND c.queue_id = $2
      GROUP BY c.tenant_id, c.queue_id, c.consumer_group`,
    [tenant, queueId],
  );
  await client.query(
    `INSERT INTO queue_stored (tenant_id, queue_id, stripe, messages)
     SELECT p.tenant_id, p.queue_id, 0, count(*)
       FROM messages m
       JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
      WHERE p.tenant_id = $1 AND p.queue_id = $2
      GROUP BY p.tenant_id, p.queue_id`,
    [tenant, queueId],
  );
  if (await hasColumn(client, 'queue_stored', 'partitions')) {
    // Partitions and their offsets too, where the broker keeps them.
    await client.query(
      `INSERT INTO queue_stored AS s (tenant_id, queue_id, stripe, messages, partitions, offsets)
       SELECT tenant_id, queue_id, 0, 0, count(*), sum(last_offset) FROM partitions
        WHERE tenant_id = $1 AND queue_id = $2 GROUP BY tenant_id, queue_id
       ON CONFLICT (tenant_id, queue_id, stripe) DO UPDATE
          SET partitions = s.partitions + excluded.partitions, offsets = s.offsets + excluded.offsets`,
      [tenant, queueId],
    );
  }
}

export async function hasColumn(client: Client, table: string, column: string): Promise<boolean> {
  const { rows } = await client.query(
    'SELECT 1 FROM information_schema.columns WHERE table_name = $1 AND column_name = $2',
    [table, column],
  );
  return rows.length > 0;
}

/** What autovacuum would have done by now (it is off on the benchmark machine). */
export async function vacuumAnalyze(client: Client): Promise<void> {
  await client.query('VACUUM ANALYZE');
}
