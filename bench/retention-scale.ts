import { Client } from 'pg';
import { call } from './http';
import { startScratchBroker } from './scratch-broker';
import { ADMIN_URL } from './database';

/*
 * Retention at scale, against a broker process running its job as shipped (RETENTION_INTERVAL_MS 30000):
 *
 * 1. Deletion on time. A backlog (queue `backlog`, retentionSeconds 60, no consumer group) becomes deletable a
 *    minute after its push; meanwhile a burst creates BURST new partitions in another queue (one message each,
 *    the default retention). Measured: from the backlog becoming deletable to its first and its last row deleted.
 *    The target is one interval + 60 s.
 * 2. Sustained deletion. BULK messages in 1,000 partitions are made deletable at once (retentionSeconds lowered
 *    from a day to 1 s once stored, which asks the job to look at the queue's partitions); measured: rows deleted per
 *    second from the first deletion to the last, the gaps between rounds included.
 *
 * Rows are counted by the database every second; the broker's `leasehold_retention_lag_seconds` is read at the
 * same time when it has one. The tables are vacuumed between phases (autovacuum is off on this machine).
 *
 *   node dist-bench/bench/retention-scale.js [--root DIR] [--burst 300000] [--bulk 1000000]
 */

const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
};

const ROOT = arg('root', process.cwd());
const BURST = Number(arg('burst', '300000'));
const BULK = Number(arg('bulk', '1000000'));
const BACKLOG = Number(arg('backlog', '100000'));
const PORT = Number(arg('port', '6790'));
const INTERVAL_MS = 30_000;
const ITEMS = 1_000;

let retries = 0;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A push that times out on the busy machine is sent again: its items carry no transaction id, a retry is new. */
async function push(base: string, items: unknown[]): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const answer = await call<Array<{ status: string }>>(base, 'POST', '/api/v1/push', { items });
    if (answer.status === 201 && answer.body.every((item) => item.status === 'queued')) return;
    if (answer.status < 500 || attempt === 20) {
      throw new Error(`push answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
    }
    retries++;
    await sleep(200 * attempt);
  }
}

/** Pushes `count` items made by `item`, `workers` requests at a time. */
async function pushAll(base: string, count: number, item: (n: number) => unknown, workers = 4): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < count) {
        const from = next;
        next = Math.min(count, next + ITEMS);
        await push(
          base,
          Array.from({ length: next - from }, (_, k) => item(from + k)),
        );
      }
    }),
  );
}

async function configure(base: string, queue: string, options: Record<string, unknown>): Promise<void> {
  const answer = await call(base, 'POST', '/api/v1/configure', { queue, options });
  if (answer.status !== 200) throw new Error(`configure answered ${answer.status}: ${JSON.stringify(answer.body)}`);
}

async function lag(base: string): Promise<number | undefined> {
  const response = await fetch(`${base}/metrics`);
  const match = /^leasehold_retention_lag_seconds(?:\{[^}]*\})? ([0-9.e+-]+)$/m.exec(await response.text());
  return match ? Number(match[1]) : undefined;
}

async function queueRows(db: Client, queue: string): Promise<number> {
  const [row] = (
    await db.query(
      `SELECT count(*)::int AS n FROM messages m
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE q.name = $1`,
      [queue],
    )
  ).rows as Array<{ n: number }>;
  return row.n;
}

/** Database clock, in seconds since the epoch: instants compared with created_at. */
async function dbNow(db: Client): Promise<number> {
  const [row] = (await db.query('SELECT extract(epoch FROM clock_timestamp())::float8 AS t')).rows as Array<{
    t: number;
  }>;
  return row.t;
}

async function main(): Promise<void> {
  const broker = await startScratchBroker({
    adminUrl: ADMIN_URL,
    database: 'leasehold_bench_retention_scale',
    root: ROOT,
    port: PORT,
    env: {
      RETENTION_INTERVAL_MS: String(INTERVAL_MS),
      DB_STATEMENT_TIMEOUT_MS: '5000',
      TENANT_MAX_PARTITIONS: '100000000',
      TENANT_MAX_STORED_MESSAGES: '100000000',
    },
  });
  const db = new Client({ connectionString: broker.databaseUrl });
  await db.connect();
  try {
    for (let tries = 0; ; tries++) {
      const health = await fetch(`${broker.base}/health`).catch(() => undefined);
      if (health?.ok) break;
      if (tries > 600) throw new Error('broker did not start');
      await sleep(100);
    }
    console.log(`root ${ROOT}; burst ${BURST} partitions, backlog ${BACKLOG}, bulk ${BULK}`);

    // 1. Deletion on time while a burst creates partitions: the backlog is pushed once the burst is under way.
    await configure(broker.base, 'backlog', { retentionSeconds: 60 });
    const burstStarted = await dbNow(db);
    let created = 0;
    const burst = pushAll(
      broker.base,
      BURST,
      (n) => {
        created = Math.max(created, n);
        return { queue: 'burst', partition: `p${n}`, payload: { n } };
      },
      2,
    );
    let burstDone: number | undefined;
    const burstTimed = burst.then(async () => {
      burstDone = await dbNow(db);
    });
    burstTimed.catch(() => undefined);
    // What autovacuum would do as the tables grow from empty: without it the push's plans go stale.
    let analysed = 0;
    const analyse = async () => {
      if (created - analysed < Math.max(10_000, analysed)) return;
      analysed = created;
      await db.query('ANALYZE partitions, messages, consumers');
    };
    const analyser = setInterval(() => void analyse().catch(() => undefined), 2_000);
    while (created < Math.min(BURST - 1, 20_000) && burstDone === undefined) await sleep(500);
    await pushAll(broker.base, BACKLOG, (n) => ({ queue: 'backlog', partition: `b${n % 100}`, payload: { n } }), 1);
    const [span] = (
      await db.query(
        `SELECT extract(epoch FROM min(m.created_at))::float8 + 60 AS first,
                extract(epoch FROM max(m.created_at))::float8 + 60 AS last
           FROM messages m
           JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
           JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
          WHERE q.name = 'backlog'`,
      )
    ).rows as Array<{ first: number; last: number }>;
    let firstDeleted: number | undefined;
    let lastDeleted: number | undefined;
    let maxLag = 0;
    let createdAtDeletable: number | undefined;
    const deadline = span.last + 1_800;
    for (;;) {
      const [left, now, seen] = [await queueRows(db, 'backlog'), await dbNow(db), await lag(broker.base)];
      if (seen !== undefined) maxLag = Math.max(maxLag, seen);
      if (createdAtDeletable === undefined && now >= span.first) createdAtDeletable = created;
      if (firstDeleted === undefined && left < BACKLOG) firstDeleted = now;
      if (left === 0) {
        lastDeleted = now;
        break;
      }
      if (now > deadline) break;
      await sleep(1_000);
    }
    console.log(`backlog done; partitions created so far ${created}`);
    await burstTimed;
    clearInterval(analyser);
    const burstSeconds = (burstDone ?? (await dbNow(db))) - burstStarted;
    console.log(
      JSON.stringify({
        phase: 'deletion on time',
        burstPartitions: BURST,
        partitionsCreatedWhenBacklogDeletable: createdAtDeletable ?? null,
        burstSeconds: Math.round(burstSeconds),
        burstPartitionsPerSecond: Math.round(BURST / burstSeconds),
        firstDeletedAfterDeletableSeconds: firstDeleted === undefined ? null : Math.round(firstDeleted - span.first),
        allDeletedAfterLastDeletableSeconds: lastDeleted === undefined ? null : Math.round(lastDeleted - span.last),
        maxLagSeconds: Math.round(maxLag),
        pushRetries: retries,
      }),
    );

    // 2. Sustained deletion of a backlog made deletable at once.
    await db.query('VACUUM ANALYZE');
    await configure(broker.base, 'bulk', { retentionSeconds: 86_400 });
    await pushAll(broker.base, BULK, (n) => ({ queue: 'bulk', partition: `q${n % 1_000}`, payload: { n } }), 1);
    await db.query('VACUUM ANALYZE');
    await sleep(1_500);
    await configure(broker.base, 'bulk', { retentionSeconds: 1 });
    const made = await dbNow(db);
    let started: number | undefined;
    let previous = BULK;
    let finished: number | undefined;
    const samples: number[] = [];
    for (;;) {
      const [left, now] = [await queueRows(db, 'bulk'), await dbNow(db)];
      if (started === undefined && left < BULK) started = now;
      if (started !== undefined) samples.push(previous - left);
      previous = left;
      if (left === 0) {
        finished = now;
        break;
      }
      if (now > made + 1_800) break;
      await sleep(1_000);
    }
    const seconds = finished !== undefined && started !== undefined ? finished - started : undefined;
    console.log(
      JSON.stringify({
        phase: 'sustained deletion',
        rows: BULK,
        firstDeletedAfterDeletableSeconds: started === undefined ? null : Math.round(started - made - 1),
        drainSeconds: seconds === undefined ? null : Math.round(seconds),
        rowsPerSecond: seconds === undefined ? null : Math.round(BULK / seconds),
        bestSecond: Math.max(0, ...samples),
        left: finished === undefined ? previous : 0,
      }),
    );
  } finally {
    await db.end();
    await broker.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
