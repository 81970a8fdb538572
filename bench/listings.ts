import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { percentile } from './http';
import { startScratchBroker } from './scratch-broker';
import { ADMIN_URL } from './database';

/*
 * `npm run bench:listings`: the listings a read-only token may call, and the console's pages, on one tenant's queue
 * of BENCH_LISTINGS_PARTITIONS partitions (default 1,000,000) read by BENCH_LISTINGS_GROUPS groups (10), seeded by
 * SQL: every group has a drained cursor in the first BENCH_LISTINGS_TOUCHED partitions (100,000: cursors are made
 * where a group had something to read, and the rest went quiet before the groups started), and BENCH_LISTINGS_LAGGING
 * of them (1000) hold two messages no group has read, ten minutes old. Each route is called BENCH_LISTINGS_CALLS times (200) one after the
 * other (ten when they take seconds); then eight loops of listings run for five seconds while another tenant pushes and pops. BENCH_BROKER_ROOT
 * names another built checkout whose broker to run instead of this one. Prints one JSON line.
 */

const DATABASE = process.env.BENCH_DATABASE ?? 'leasehold_bench_listings';
const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..'));
const PARTITIONS = Number(process.env.BENCH_LISTINGS_PARTITIONS ?? 1_000_000);
const GROUPS = Number(process.env.BENCH_LISTINGS_GROUPS ?? 10);
const LAGGING = Number(process.env.BENCH_LISTINGS_LAGGING ?? 1_000);
const TOUCHED = Number(process.env.BENCH_LISTINGS_TOUCHED ?? 100_000);
const CALLS = Number(process.env.BENCH_LISTINGS_CALLS ?? 200);
const PORT = Number(process.env.BENCH_PORT ?? 6911);
const HEADER = 'x-bench-tenant';

const ROUTES = [
  '/api/v1/consumer-groups',
  '/api/v1/consumer-groups?queue=big',
  '/api/v1/consumer-groups/lagging',
  '/api/v1/consumer-groups/g0?queue=big&limit=100',
  '/api/v1/resources/queues',
  '/api/v1/resources/queues/big',
  '/api/v1/resources/queues/big/leases',
  '/api/v1/messages?queue=big&limit=50',
  '/api/v1/dlq?queue=big',
];

async function seed(databaseUrl: string, tenant: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const [{ id: queueId }] = (await db.query(`SELECT id FROM queues WHERE tenant_id = $1 AND name = 'big'`, [tenant]))
      .rows as Array<{ id: string }>;
    await db.query(
      `INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset)
       SELECT $1, gen_random_uuid(), $2, 'p' || lpad(i::text, 7, '0'), CASE WHEN i <= $4 THEN 3 ELSE 1 END
         FROM generate_series(1, $3) i`,
      [tenant, queueId, PARTITIONS, LAGGING],
    );
    await db.query(
      `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, created_at, payload_bytes)
       SELECT p.tenant_id, p.id, s, gen_random_uuid(), p.name || '-' || s, '{}'::json,
              now() - CASE WHEN s = 1 THEN interval '1 hour' ELSE interval '10 minutes' END, 2
         FROM partitions p CROSS JOIN LATERAL generate_series(1, p.last_offset) s
        WHERE p.tenant_id = $1`,
      [tenant],
    );
    await db.query(
      `INSERT INTO consumer_groups (tenant_id, queue_id, name) SELECT $1, $2, 'g' || g FROM generate_series(0, $3 - 1) g`,
      [tenant, queueId, GROUPS],
    );
    await db.query(
      `INSERT INTO consumers (tenant_id, partition_id, consumer_group, queue_id, committed_offset, delivered_offset, ready)
       SELECT p.tenant_id, p.id, g.name, p.queue_id, 1, 1, p.last_offset > 1
         FROM partitions p JOIN consumer_groups g ON g.tenant_id = p.tenant_id AND g.queue_id = p.queue_id
        WHERE p.tenant_id = $1 AND p.name <= 'p' || lpad($2::text, 7, '0')`,
      [tenant, TOUCHED],
    );
    await db.query('VACUUM ANALYZE');
  } finally {
    await db.end();
  }
}

async function timed(base: string, tenant: string, path: string): Promise<{ ms: number; status: number }> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`, { headers: { [HEADER]: tenant } });
  await response.arrayBuffer();
  return { ms: performance.now() - started, status: response.status };
}

async function main(): Promise<void> {
  const broker = await startScratchBroker({
    adminUrl: ADMIN_URL,
    database: DATABASE,
    root: ROOT,
    port: PORT,
    env: { TENANT_HEADER: HEADER, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_MANAGE: '0' },
  });
  try {
    const tenant = crypto.randomUUID();
    const configured = await fetch(`${broker.base}/api/v1/configure`, {
      method: 'POST',
      headers: { [HEADER]: tenant, 'content-type': 'application/json' },
      body: JSON.stringify({ queue: 'big', options: { leaseTime: 60 } }),
    });
    if (!configured.ok) throw new Error(`configure answered ${configured.status}`);
    const seedStarted = performance.now();
    await seed(broker.databaseUrl, tenant);
    const seedSeconds = Math.round((performance.now() - seedStarted) / 1000);

    const routes: Record<string, { calls: number; p50: number; p99: number; max: number; statuses: number[] }> = {};
    for (const path of ROUTES) {
      const samples: number[] = [];
      const statuses = new Set<number>();
      for (let call = 0; call < CALLS + 5; call += 1) {
        const { ms, status } = await timed(broker.base, tenant, path);
        statuses.add(status);
        if (call >= 5) samples.push(ms);
        // A route that takes seconds has told what it costs within ten calls.
        if (samples.length >= 10 && percentile(samples, 0.5) > 1_000) break;
      }
      routes[path] = {
        calls: samples.length,
        p50: round(percentile(samples, 0.5)),
        p99: round(percentile(samples, 0.99)),
        max: round(Math.max(...samples)),
        statuses: [...statuses].sort(),
      };
    }

    // Eight loops of listings of the big tenant, and another tenant's push and pop meanwhile.
    const until = performance.now() + 5_000;
    const answered = new Map<number, number>();
    const loops = Array.from({ length: 8 }, async (_, loop) => {
      while (performance.now() < until) {
        const { status } = await timed(broker.base, tenant, ROUTES[loop % ROUTES.length]);
        answered.set(status, (answered.get(status) ?? 0) + 1);
      }
    });
    const other = crypto.randomUUID();
    const pushPop: number[] = [];
    const small = (async () => {
      while (performance.now() < until) {
        const started = performance.now();
        await fetch(`${broker.base}/api/v1/push`, {
          method: 'POST',
          headers: { [HEADER]: other, 'content-type': 'application/json' },
          body: JSON.stringify({ items: [{ queue: 'small', payload: { n: 1 } }] }),
        }).then((response) => response.arrayBuffer());
        await fetch(`${broker.base}/api/v1/pop/queue/small?wait=false&autoAck=true`, {
          headers: { [HEADER]: other },
        }).then((response) => response.arrayBuffer());
        pushPop.push(performance.now() - started);
      }
    })();
    await Promise.all([...loops, small]);

    console.log(
      JSON.stringify({
        partitions: PARTITIONS,
        groups: GROUPS,
        laggingPartitions: LAGGING,
        touchedPartitions: TOUCHED,
        seedSeconds,
        calls: CALLS,
        routes,
        underEightLoops: {
          listingAnswers: Object.fromEntries(answered),
          otherTenantPushPopMs: { p50: round(percentile(pushPop, 0.5)), p99: round(percentile(pushPop, 0.99)) },
        },
      }),
    );
  } finally {
    await broker.stop();
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
