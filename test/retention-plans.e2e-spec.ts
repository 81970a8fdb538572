import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { PartitionRules, RetentionRepository } from '../src/retention/retention.repository';
import { explainRolledBack, rowsBeyond } from './support/plans';
import { onEmbeddedDatabase } from './support/test-app';
import { ScratchDatabase } from './support/scratch-database';

/**
 * A retention round cuts a few small partitions of a database whose other partitions hold many messages, as after a
 * burst of pushes to a queue nobody reads: the statistics then say a partition holds tens of thousands of rows, and
 * the cut's delete, written as a range of each partition, was planned as a scan of the whole messages table (8 million
 * rows read by every round of the full npm run bench, 1.3 s of PostgreSQL's CPU a round). Checked by the rows each
 * plan node reads in all its loops, against what the cut partitions hold.
 */
const BIG_PARTITIONS = 4;
const BIG_MESSAGES = 50_000;
const SMALL_PARTITIONS = 10;
const SMALL_MESSAGES = 20;
/** Rows a plan node may read in all its loops: a few passes over what the cut partitions hold. */
const MOST_ROWS = 4 * SMALL_PARTITIONS * SMALL_MESSAGES;

(onEmbeddedDatabase ? describe.skip : describe)('a retention round beside partitions that hold many messages', () => {
  let scratch: ScratchDatabase;
  let db: Client;
  const tenant = randomUUID();
  let small: string[];

  /** A queue of `partitions` partitions of `messages` messages each, an hour old, and a group half way through each. */
  async function queue(name: string, partitions: number, messages: number): Promise<string[]> {
    const queueId = randomUUID();
    await db.query('INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, $3)', [tenant, queueId, name]);
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset)
       SELECT $1, gen_random_uuid(), $2, 'p' || i, $4 FROM generate_series(1, $3) i RETURNING id`,
      [tenant, queueId, partitions, messages],
    );
    await db.query(
      `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, payload_bytes, created_at)
       SELECT p.tenant_id, p.id, s, gen_random_uuid(), 't' || s, '{"n": 1}', 8, now() - interval '1 hour'
         FROM partitions p CROSS JOIN generate_series(1, $2) s WHERE p.queue_id = $1`,
      [queueId, messages],
    );
    await db.query("INSERT INTO consumer_groups (tenant_id, queue_id, name) VALUES ($1, $2, 'g')", [tenant, queueId]);
    await db.query(
      `INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, delivered_offset)
       SELECT tenant_id, queue_id, id, 'g', $2, $2 FROM partitions WHERE queue_id = $1`,
      [queueId, messages / 2],
    );
    return rows.map((row) => row.id);
  }

  beforeAll(async () => {
    scratch = await ScratchDatabase.create('leasehold_retention_plans');
    db = new Client({ connectionString: scratch.url });
    await db.connect();
    await queue('pushed', BIG_PARTITIONS, BIG_MESSAGES);
    small = await queue('read', SMALL_PARTITIONS, SMALL_MESSAGES);
    await db.query('ANALYZE');
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    await scratch?.drop();
  });

  const rules = (overrides: Partial<PartitionRules>): PartitionRules[] =>
    small.map((partitionId) => ({
      tenantId: tenant,
      partitionId,
      pendingSeconds: null,
      evictSeconds: null,
      completedSeconds: null,
      letters: false,
      graceSeconds: null,
      ...overrides,
    }));
  const cuts: Array<[string, Partial<PartitionRules>]> = [
    ['completed retention', { completedSeconds: 60 }],
    ['eviction into the dead letters', { evictSeconds: 60, letters: true }],
  ];

  for (const [name, overrides] of cuts) {
    // `auto`: the round's statements are not prepared; each is planned for its values, as a first call is.
    it(`reads what the cut partitions hold, not the table, for ${name}`, async () => {
      const { text, values } = new RetentionRepository().trim(rules(overrides), 100, 'evicted');
      const plan = await explainRolledBack(db, text, values, 'auto');
      expect(rowsBeyond(plan, { read: MOST_ROWS, compared: MOST_ROWS })).toEqual([]);
    });
  }

  it('cuts what the rules say, taken by key', async () => {
    const held = (SMALL_PARTITIONS * SMALL_MESSAGES) / 2;
    const cases: Array<[Partial<PartitionRules>, Record<string, number>, number]> = [
      // Completed retention takes what the group read; eviction takes all, dead-lettering what the group had not read.
      [{ completedSeconds: 60 }, { completed: held, evicted: 0, lettered: 0 }, held],
      [{ evictSeconds: 60, letters: true }, { evicted: 2 * held, retention: 0, lettered: held }, 0],
    ];
    for (const [overrides, trimmed, left] of cases) {
      await db.query('BEGIN');
      try {
        const trim = new RetentionRepository().trim(rules(overrides), 100, 'evicted');
        const { rows } = await db.query(trim.text, trim.values);
        expect(trim.parse(rows)).toMatchObject(trimmed);
        const kept = await db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM messages WHERE partition_id = ANY($1::uuid[])',
          [small],
        );
        expect(kept.rows[0].n).toBe(left);
      } finally {
        await db.query('ROLLBACK');
      }
    }
  });
});
