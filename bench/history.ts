import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { Statement } from '../src/database/statement';
import { HistoryRepository } from '../src/history/history.repository';
import { percentile } from './http';
import { startScratchBroker } from './scratch-broker';
import { ADMIN_URL } from './database';

/*
 * `npm run bench:history`: what the console's history costs as a tenant grows. One flush statement (the one each
 * broker sends once a minute) naming one queue of 100 partitions, one queue of BENCH_HISTORY_PARTITIONS (1,000,000),
 * and 100 queues of a tenant holding BENCH_HISTORY_QUEUES (10,000) idle ones, interleaved, BENCH_HISTORY_CALLS (200)
 * each per round over 5 rounds; then the week's series of a queue and of the tenant with a full week of buckets
 * (10,080 minutes), over HTTP. Seeded by SQL; autovacuum is off here, so the seed is analyzed before timing. Prints
 * one JSON line.
 */

const DATABASE = process.env.BENCH_DATABASE ?? 'leasehold_bench_history';
const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..'));
const PARTITIONS = Number(process.env.BENCH_HISTORY_PARTITIONS ?? 1_000_000);
const QUEUES = Number(process.env.BENCH_HISTORY_QUEUES ?? 10_000);
const CALLS = Number(process.env.BENCH_HISTORY_CALLS ?? 200);
const ROUNDS = 5;
const PORT = Number(process.env.BENCH_PORT ?? 6912);
const HEADER = 'x-bench-tenant';
const WEEK_MINUTES = 7 * 24 * 60;

async function seed(db: Client, tenant: string, crowd: string): Promise<void> {
  await db.query(
    `INSERT INTO queues (tenant_id, id, name) VALUES ($1, gen_random_uuid(), 'small'), ($1, gen_random_uuid(), 'big')`,
    [tenant],
  );
  await db.query(
    `INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset)
     SELECT q.tenant_id, gen_random_uuid(), q.id, 'p' || lpad(i::text, 7, '0'), 1
       FROM queues q CROSS JOIN generate_series(1, CASE q.name WHEN 'big' THEN $2::int ELSE 100 END) i
      WHERE q.tenant_id = $1`,
    [tenant, PARTITIONS],
  );
  await db.query(
    `INSERT INTO queues (tenant_id, id, name) SELECT $1, gen_random_uuid(), 'q' || lpad(i::text, 5, '0')
       FROM generate_series(1, $2) i`,
    [crowd, QUEUES],
  );
  // A full week of buckets for 'small' and for the tenant: the longest series a reader can ask for.
  await db.query(
    `INSERT INTO queue_history (tenant_id, queue_id, minute, pushed, popped, acked, max_wait_ms, lag)
     SELECT q.tenant_id, q.id, date_trunc('minute', now()) - make_interval(mins => m), 60, 60, 60, 250, 10
       FROM queues q CROSS JOIN generate_series(0, $2 - 1) m WHERE q.tenant_id = $1 AND q.name = 'small'`,
    [tenant, WEEK_MINUTES],
  );
  await db.query(
    `INSERT INTO tenant_history (tenant_id, minute, pushed, popped, acked, max_wait_ms)
     SELECT $1, date_trunc('minute', now()) - make_interval(mins => m), 60, 60, 60, 250
       FROM generate_series(0, $2 - 1) m`,
    [tenant, WEEK_MINUTES],
  );
  await db.query('ANALYZE');
}

/** One flush statement for these queues, all in the current minute. */
function flushOf(tenant: string, queues: string[]): Statement<void> {
  const minute = Math.floor(Date.now() / 60_000) * 60_000;
  return new HistoryRepository().add(
    queues.map((queue) => ({
      tenantId: tenant,
      queue,
      minute,
      pushed: 10,
      popped: 10,
      acked: 10,
      deadLettered: 0,
      maxWaitMs: 1500,
    })),
  );
}

async function timedMs(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

const round = (ms: number): number => Math.round(ms * 100) / 100;

async function main(): Promise<void> {
  const broker = await startScratchBroker({
    adminUrl: ADMIN_URL,
    database: DATABASE,
    root: ROOT,
    port: PORT,
    env: { TENANT_HEADER: HEADER, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_MANAGE: '0', HISTORY_FLUSH_MS: '0' },
  });
  const db = new Client({ connectionString: broker.databaseUrl });
  await db.connect();
  try {
    const tenant = crypto.randomUUID();
    const crowd = crypto.randomUUID();
    const seedStarted = performance.now();
    await seed(db, tenant, crowd);
    const seedSeconds = Math.round((performance.now() - seedStarted) / 1000);

    const cases: Record<string, Statement<void>> = {
      'one queue, 100 partitions': flushOf(tenant, ['small']),
      [`one queue, ${PARTITIONS} partitions`]: flushOf(tenant, ['big']),
      [`100 queues of a tenant with ${QUEUES}`]: flushOf(
        crowd,
        Array.from({ length: 100 }, (_, n) => `q${String(1 + n * Math.floor(QUEUES / 100)).padStart(5, '0')}`),
      ),
    };
    const samples = new Map<string, number[]>(Object.keys(cases).map((name) => [name, []]));
    for (let r = 0; r < ROUNDS; r += 1) {
      for (const [name, { text, values }] of Object.entries(cases)) {
        for (let call = 0; call < CALLS; call += 1) {
          samples.get(name)!.push(await timedMs(() => db.query(text, values)));
        }
      }
    }
    const flush = Object.fromEntries(
      [...samples].map(([name, ms]) => [name, { p50: round(percentile(ms, 0.5)), p99: round(percentile(ms, 0.99)) }]),
    );

    const reads: Record<string, { p50: number; p99: number; points: number }> = {};
    for (const path of ['/api/v1/resources/queues/small/history?range=week', '/api/v1/resources/history?range=week']) {
      const ms: number[] = [];
      let points = 0;
      for (let call = 0; call < 55; call += 1) {
        const started = performance.now();
        const response = await fetch(`${broker.base}${path}`, { headers: { [HEADER]: tenant } });
        const body = (await response.json()) as { points: unknown[] };
        if (!response.ok) throw new Error(`${path} answered ${response.status}`);
        if (call >= 5) ms.push(performance.now() - started);
        points = body.points.length;
      }
      reads[path] = { p50: round(percentile(ms, 0.5)), p99: round(percentile(ms, 0.99)), points };
    }
    console.log(
      JSON.stringify({ bench: 'history', partitions: PARTITIONS, queues: QUEUES, seedSeconds, flush, reads }),
    );
  } finally {
    await db.end();
    await broker.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
