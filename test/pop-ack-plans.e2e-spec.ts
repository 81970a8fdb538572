import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { AckRepository } from '../src/ack/ack.repository';
import { sql, Statement } from '../src/database/statement';
import { PayloadCipher } from '../src/encryption/payload-cipher';
import { ClaimRequest, PopRepository } from '../src/pop/pop.repository';
import { PushRepository } from '../src/push/push.repository';
import { MAX_STATE_ROWS } from '../src/streams/dto/state-get.dto';
import { StateFilter, StreamsRepository } from '../src/streams/streams.repository';
import { TransactionRepository } from '../src/transaction/transaction.repository';
import { explainRolledBack, literalsOf, PlanNode } from './support/plans';
import { ScratchDatabase } from './support/scratch-database';
import { onEmbeddedDatabase } from './support/test-app';

/**
 * The hot statements' plans on a database whose tables grew from empty since
 * their last ANALYZE (a new tenant's burst before autovacuum comes by): the
 * planner then believes a tenant holds a handful of rows, and a plan that
 * reads all of them looks as cheap as a lookup by key. Checked by plan shape
 * (EXPLAIN ANALYZE's row counts), not by time, in a scratch database of its
 * own with autovacuum off, as generic and as custom plans, stale and analysed.
 */
const PARTITIONS = 5000;
const GROUP = '__QUEUE_MODE__';
const KEYED_TABLES = new Set(['consumers', 'partitions', 'messages', 'queues', 'stream_queries', 'stream_state']);
/** Partitions held by live leases, LEASE_SPAN to a lease: the tenant holds hundreds of leases, as busy consumers do. */
const LEASED = 4000;
const LEASE_SPAN = 10;
/** Rows one scan node may touch per loop: the claim asks for 10 partitions, the ack names 10 messages. */
const MOST_ROWS_PER_LOOP = 20;

type Value = string | number | boolean | null | Array<string | number | boolean>;

/** Scans of the tenant's tables that read more rows per loop than the statement's keys can reach. */
function wideScans(node: PlanNode, found: string[] = []): string[] {
  const table = node['Relation Name'];
  if (table !== undefined && KEYED_TABLES.has(table) && node['Node Type'].endsWith('Scan')) {
    const loops = Math.max(node['Actual Loops'], 1);
    const read =
      (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) /
      loops;
    if (read > MOST_ROWS_PER_LOOP) {
      found.push(`${node['Node Type']} on ${table} (${node['Index Name'] ?? 'no index'}): ${read} rows a loop`);
    }
  }
  for (const child of node.Plans ?? []) wideScans(child, found);
  return found;
}

function foundIn(node: PlanNode, table: string): boolean {
  if (node['Relation Name'] === table && node['Actual Rows'] > 0) return true;
  return (node.Plans ?? []).some((child) => foundIn(child, table));
}

/** A queue the statements are aimed at: ten of its messages' keys, and a live lease on the first one's partition. */
interface Target {
  name: string;
  queueId: string;
  lease: string;
  queryId: string;
  keys: Array<{ partitionId: string; partition: string; transactionId: string }>;
}

/** SMALL_PARTITIONS partitions of one message each, the group's cursors, the first half leased: a small queue. */
const SMALL_PARTITIONS = 10;

(onEmbeddedDatabase ? describe.skip : describe)('hot statement plans without fresh statistics', () => {
  const tenant = randomUUID();
  let scratch: ScratchDatabase;
  let db: Client;
  /** The tenant's 5,000-partition queue, and a small one beside it, as a pipeline's stage keeps. */
  let burst: Target;
  let small: Target;

  beforeAll(async () => {
    scratch = await ScratchDatabase.create('leasehold_plans');
    db = new Client({ connectionString: scratch.url });
    await db.connect();
    for (const table of KEYED_TABLES) await db.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    // What a push of one message to each of a queue's partitions and the group's first pop leave behind.
    const queueOf = async (name: string, partitions: number): Promise<string> => {
      const queueId = randomUUID();
      await db.query('INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, $3)', [tenant, queueId, name]);
      await db.query(
        `INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset)
         SELECT $1, gen_random_uuid(), $2, 'p' || i, 1 FROM generate_series(1, $3) i`,
        [tenant, queueId, partitions],
      );
      await db.query(
        `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, payload_bytes, created_at)
         SELECT tenant_id, id, 1, gen_random_uuid(), gen_random_uuid()::text, '{"n": 1}', 8, now() - interval '1 hour'
           FROM partitions WHERE queue_id = $1`,
        [queueId],
      );
      await db.query('INSERT INTO consumer_groups (tenant_id, queue_id, name) VALUES ($1, $2, $3)', [
        tenant,
        queueId,
        GROUP,
      ]);
      await db.query(
        `INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group)
         SELECT tenant_id, queue_id, id, $1 FROM partitions WHERE queue_id = $2 ORDER BY id`,
        [GROUP, queueId],
      );
      // A stream query keeping state for each partition.
      const queryId = randomUUID();
      await db.query(
        `INSERT INTO stream_queries (tenant_id, id, name, source_queue_id, config_hash) VALUES ($1, $2, $3, $4, 'h')`,
        [tenant, queryId, `sums-${name}`, queueId],
      );
      await db.query(
        `INSERT INTO stream_state (tenant_id, query_id, partition_id, key, value, bytes)
         SELECT tenant_id, $1, id, 'sum', '{"sum": 1}', 13 FROM partitions WHERE queue_id = $2`,
        [queryId, queueId],
      );
      return queueId;
    };
    /** `leased` of the queue's partitions leased, `span` to a lease, and claimed since the rest (a claim moves a cursor to the back). */
    const lease = async (queueId: string, leased: number, span: number, prefix: string): Promise<void> => {
      await db.query(
        `UPDATE consumers c SET lease_id = l.lease, lease_expires_at = now() + interval '1 hour', delivered_offset = 1,
                                updated_at = now() + interval '1 minute'
           FROM (SELECT partition_id, row_number() OVER (ORDER BY partition_id) AS n FROM consumers WHERE queue_id = $3) o
          CROSS JOIN LATERAL (SELECT ($4 || lpad(((o.n - 1) / $1)::text, 12, '0'))::uuid AS lease) l
          WHERE c.partition_id = o.partition_id AND o.n <= $2`,
        [span, leased, queueId, prefix],
      );
    };
    const targetOf = async (name: string, queueId: string): Promise<Target> => {
      const rows = await db.query<{ partition_id: string; name: string; transaction_id: string }>(
        `SELECT m.partition_id, p.name, m.transaction_id FROM messages m JOIN partitions p ON p.id = m.partition_id
          WHERE p.queue_id = $1 ORDER BY m.partition_id LIMIT 10`,
        [queueId],
      );
      const keys = rows.rows.map((row) => ({
        partitionId: row.partition_id,
        partition: row.name,
        transactionId: row.transaction_id,
      }));
      const held = await db.query<{ lease_id: string; query_id: string }>(
        `SELECT c.lease_id, q.id AS query_id FROM consumers c JOIN stream_queries q ON q.source_queue_id = c.queue_id
          WHERE c.partition_id = $1`,
        [keys[0].partitionId],
      );
      return { name, queueId, keys, lease: held.rows[0].lease_id, queryId: held.rows[0].query_id };
    };
    const burstId = await queueOf('burst', PARTITIONS);
    await lease(burstId, LEASED, LEASE_SPAN, '00000000-0000-4000-8000-');
    const smallId = await queueOf('small', SMALL_PARTITIONS);
    await lease(smallId, SMALL_PARTITIONS / 2, SMALL_PARTITIONS, '00000000-0000-4000-9000-');
    burst = await targetOf('burst', burstId);
    small = await targetOf('small', smallId);
  });

  afterAll(async () => {
    await db?.end();
    await scratch?.drop();
  });

  /** The hot statements on `target`, for `count` of its ten keys (one: as a consumer acking its one partition sends them). */
  function statements(
    { name: queueName, queueId, lease, queryId, keys: all }: Target,
    count = all.length,
  ): Array<{ name: string; prepared: boolean; text: string; values: Value[]; setup?: string }> {
    const keys = all.slice(0, count);
    const statement = (name: string, { name: prepared, text, values }: Statement<unknown>) => ({
      name,
      prepared: prepared !== undefined,
      text,
      values: values as Value[],
    });
    const claim = (partitions: number, shape: Partial<ClaimRequest> = {}, named = '') => {
      const request: ClaimRequest = {
        queueId,
        partitionId: undefined,
        consumerGroup: GROUP,
        leaseId: randomUUID(),
        leaseSeconds: 60,
        leaseTime: 60,
        batch: 10,
        maxPartitions: partitions,
        autoAck: false,
        maxBytes: 1048576,
        maxTotalSeconds: undefined,
        delayedProcessing: 0,
        windowBuffer: 0,
        retryDelayMs: 0,
        ...shape,
      };
      return {
        ...statement(
          `the claim of ${partitions} partitions${named}`,
          new PopRepository({} as PayloadCipher).claim(tenant, request),
        ),
        // The queue configured as the claim was planned, which it holds the queue to.
        setup: `UPDATE queues SET lease_time = ${request.leaseTime}, delayed_processing = ${request.delayedProcessing},
                       window_buffer = ${request.windowBuffer}, retry_delay_ms = ${request.retryDelayMs}
                 WHERE id = '${queueId}'`,
      };
    };
    const acks = new AckRepository();
    const cursors = keys.map(({ partitionId }) => ({ partitionId, consumerGroup: GROUP }));
    const transactions = new TransactionRepository();
    const streams = new StreamsRepository();
    const named = new Map([[queueName, new Map(keys.map(({ partition }) => [partition, undefined]))]]);
    return [
      statement("the push's lock", new PushRepository().lockNamed(tenant, named)),
      statement(
        "the push's partition lock",
        new PushRepository().lockPartitions(
          tenant,
          keys.map(({ partition }) => ({ queueId, name: partition })),
        ),
      ),
      statement("the transaction's lock", transactions.lock(tenant, [lease], cursors)!),
      statement("the transaction's lock of its required leases alone", transactions.lock(tenant, [lease], [])!),
      statement("the transaction's lease check at COMMIT", transactions.heldAtCommit(tenant, [lease])),
      statement("the cycle's query and partition", streams.cycleTarget(tenant, queryId, keys[0].partitionId)),
      ...(
        [
          ['by keys', { keys: ['sum'] }],
          ['of all keys', {}],
          ['by prefix', { keyPrefix: 'su' }],
          ['of ripe windows', { ripeAtOrBefore: 1000 }],
        ] as Array<[string, Partial<StateFilter>]>
      ).map(([shape, filter]) =>
        statement(
          `the state read ${shape}`,
          streams.stateRead(
            tenant,
            queryId,
            keys[0].partitionId,
            { keys: [], keyPrefix: undefined, ripeAtOrBefore: undefined, ...filter },
            MAX_STATE_ROWS + 1,
          ),
        ),
      ),
      statement(
        "the cycle's state",
        streams.applyState(tenant, queryId, keys[0].partitionId, [
          { type: 'upsert', key: 'sum', valueJson: '{"sum": 2}' },
          { type: 'delete', key: 'w:1', valueJson: null },
        ])!,
      ),
      claim(1),
      claim(10),
      claim(10, { windowBuffer: 1 }, ' with windowBuffer'),
      claim(10, { delayedProcessing: 1 }, ' with delayedProcessing'),
      claim(10, { retryDelayMs: 1000 }, ' with retryDelay'),
      claim(1, { partitionId: keys[0].partitionId }, ' by partition id'),
      statement("the ack's cursor lock", acks.lockCursors(tenant, cursors)),
      statement("the ack's offsets", acks.offsets(tenant, keys)),
      statement(
        "the ack's cursor update",
        acks.saveCursors(
          tenant,
          cursors.map((cursor) => ({
            ...cursor,
            committedOffset: 1,
            committedBefore: 0,
            retryCount: 0,
            releaseLease: true,
            retryAfterMs: 0,
          })),
        ),
      ),
      statement(
        "the ack of a batch handed out, on its claim's cursor",
        acks.saveHandedOut(
          tenant,
          {
            ...cursors[0],
            committedOffset: 1,
            committedBefore: 0,
            retryCount: 0,
            releaseLease: true,
            retryAfterMs: 0,
          },
          {
            leaseId: lease,
            leaseEpoch: 1,
            committedOffset: 0,
            leaseEndOffset: 1,
            acked: new Map(keys.map(({ transactionId }, index) => [transactionId, index + 1])),
          },
          (messages) => sql`pg_notify('leasehold_plans', ${messages}::text)`,
        ),
      ),
      statement(
        "the push's duplicate check by name",
        new PushRepository().findExistingByName(
          tenant,
          keys.map(({ partition, transactionId }) => ({ queue: queueName, partition, transactionId })),
        ),
      ),
      statement("the push's duplicate check", new PushRepository().findExisting(tenant, keys)),
      statement(
        "the push's rows, cursors, counters and usage",
        new PushRepository().store(
          tenant,
          null,
          keys.map(({ partitionId }) => ({
            partitionId,
            seq: 2,
            id: randomUUID(),
            transactionId: randomUUID(),
            traceId: null,
            payloadJson: '{"n": 2}',
            payloadBytes: 8,
            keyId: null,
          })),
          new Map(keys.map(({ partitionId }) => [partitionId, 2])),
          { change: { bytes: 80, messages: 10 }, limits: undefined },
        ),
      ),
    ];
  }

  // The broker sends a statement without a name unprepared, and PostgreSQL plans it at every call, whatever its shape.
  it('sends each of them prepared', () => {
    expect(
      statements(burst)
        .filter((statement) => !statement.prepared)
        .map((statement) => statement.name),
    ).toEqual([]);
  });

  for (const statistics of ['stale', 'analysed']) {
    for (const mode of ['force_generic_plan', 'force_custom_plan']) {
      it(`reads only the rows its keys name, with ${statistics} statistics and plan_cache_mode ${mode}`, async () => {
        if (statistics === 'analysed') await db.query('ANALYZE');
        const wide: string[] = [];
        for (const target of [burst, small]) {
          for (const statement of statements(target)) {
            const plan = await explainRolledBack(db, statement.text, statement.values, mode, statement);
            const scans = wideScans(plan);
            // A claim whose queue check failed would not look at its cursors, and would read nothing to hold it to.
            // Its queue as it was planned with, or the claim would stop at its check of the queue and read nothing.
            if (statement.setup && !foundIn(plan, 'queues')) scans.push('its queue check found nothing');
            wide.push(...scans.map((scan) => `${target.name}, ${statement.name}: ${scan}`));
          }
        }
        expect(wide).toEqual([]);
      });
    }
  }

  // A statement planned at every call costs PostgreSQL more than running it (the claim: 1.2 ms against 0.3). It is,
  // when its custom plans look cheaper than the generic one: a one-key array, a LIMIT the generic plan cannot see, or a
  // small queue's keys beside a large queue's. Statements joining a request's rows to one another show the length of
  // arrays over UNSIZED_ROWS (requestArrays), and those are planned at every call: test/push-plans-wide.
  for (const [queue, named] of [
    ['burst', 1],
    ['burst', 10],
    ['small', 1],
    ['small', 10],
  ] as const) {
    it(`keeps a generic plan for each on the ${queue} queue, called with ${named} key${named === 1 ? '' : 's'}`, async () => {
      await db.query('ANALYZE');
      await db.query('SET plan_cache_mode = auto');
      const replanned: string[] = [];
      for (const statement of statements(queue === 'burst' ? burst : small, named)) {
        await db.query('DEALLOCATE ALL');
        await db.query(`PREPARE statement AS ${statement.text}`);
        await db.query('BEGIN');
        try {
          if (statement.setup) await db.query(statement.setup);
          // Past the five custom plans after which PostgreSQL weighs the generic one; each call undone, so the last
          // runs on what the first did.
          for (let call = 0; call < 8; call += 1) {
            await db.query('SAVEPOINT call');
            await db.query(`EXECUTE statement(${literalsOf(db, statement.values).join(', ')})`);
            await db.query('ROLLBACK TO SAVEPOINT call');
          }
        } finally {
          await db.query('ROLLBACK');
        }
        const { rows } = await db.query<{ generic_plans: string; custom_plans: string }>(
          "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'statement'",
        );
        if (Number(rows[0].generic_plans) === 0) replanned.push(statement.name);
      }
      expect(replanned).toEqual([]);
    });
  }
});
