import { ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { percentile } from './http';
import { startFlags } from './start-flags';
import { ADMIN_URL, dropDatabase, recreateDatabase } from './database';

/*
 * Sixteen broker processes on one PostgreSQL under load: how many connections they hold at most (pg_stat_activity,
 * sampled every 100 ms), and how soon a poll parked on one broker gets a message pushed through another (push answer
 * to poll answer, a NOTIFY across processes).
 *
 *   npm run build && npx tsc -p tsconfig.bench.json && node dist-bench/bench/brokers.js [brokers] [seconds]
 *
 * BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_BROKER_ROOT (default this checkout),
 * BENCH_BROKER_ENV (extra settings for every broker, as JSON, e.g. '{"DB_CONNECTION_BUDGET":"0"}').
 */

const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..'));
const DATABASE = 'leasehold_bench_brokers';
const FIRST_PORT = Number(process.env.BENCH_PORT ?? 3400);
const EXTRA_ENV = JSON.parse(process.env.BENCH_BROKER_ENV ?? '{}') as Record<string, string>;
/** Producers and consumers per broker, each a loop of one request at a time. */
const LOOPS_PER_BROKER = 1;
/** Wakeup rounds in flight at once, each on its own queue and pair of brokers. */
const WAKE_CHAINS = 4;

async function main(): Promise<void> {
  const brokers = Number(process.argv[2] ?? 16);
  const seconds = Number(process.argv[3] ?? 30);
  const url = await recreateDatabase(ADMIN_URL, DATABASE);
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const maxConnections = (await admin.query<{ max_connections: string }>(`SHOW max_connections`)).rows[0]
    .max_connections;
  const children: ChildProcess[] = [];
  let peak = 0;
  let sampling = true;
  try {
    // The first migrates the database; the others start once it is ready.
    for (let index = 0; index < brokers; index += 1) {
      children.push(startBroker(index, url));
      if (index === 0) await untilReady(base(0));
    }
    await Promise.all(children.map((_, index) => untilReady(base(index))));
    // Every broker counts the others at its next heartbeat (1 s here) and sizes its pool.
    await sleep(3_000);
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await admin.query<{ count: string }>(
          `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`,
          [DATABASE],
        );
        peak = Math.max(peak, Number(rows[0].count));
        await sleep(100);
      }
    })();
    const until = performance.now() + seconds * 1_000;
    let pushed = 0;
    let popped = 0;
    const load: Array<Promise<void>> = [];
    for (let index = 0; index < brokers; index += 1) {
      for (let loop = 0; loop < LOOPS_PER_BROKER; loop += 1) {
        const queue = `load-${(index * LOOPS_PER_BROKER + loop) % 8}`;
        load.push(
          (async () => {
            while (performance.now() < until) {
              const items = Array.from({ length: 10 }, (_, n) => ({ queue, partition: `p${n}`, payload: { n } }));
              if ((await post(base(index), '/api/v1/push', { items })) === 201) pushed += 10;
            }
          })(),
          (async () => {
            const other = (index + 1) % brokers;
            while (performance.now() < until) {
              const answer = await fetch(`${base(other)}/api/v1/pop/queue/${queue}?batch=20&autoAck=true`);
              const text = await answer.text();
              if (answer.status === 200) popped += (JSON.parse(text) as { messages: unknown[] }).messages.length;
            }
          })(),
        );
      }
    }
    // Cross-process wakeups under that load: a poll parks on broker i, the push goes through broker i + 1.
    const wakeups: number[] = [];
    let failed = 0;
    let round = 0;
    const chain = async (): Promise<void> => {
      while (performance.now() < until - 2_000) {
        const index = round % brokers;
        const queue = `wake-${round}`;
        round += 1;
        const poll = fetch(`${base(index)}/api/v1/pop/queue/${queue}?wait=true&timeout=10000&autoAck=true`).then(
          async (answer) => ({ status: answer.status, at: (await answer.text(), performance.now()) }),
        );
        await sleep(300);
        const status = await post(base((index + 1) % brokers), '/api/v1/push', {
          items: [{ queue, payload: { round } }],
        });
        const pushedAt = performance.now();
        const answer = await poll;
        if (status !== 201 || answer.status !== 200) failed += 1;
        else wakeups.push(answer.at - pushedAt);
      }
    };
    await Promise.all(Array.from({ length: WAKE_CHAINS }, chain));
    await Promise.all(load);
    sampling = false;
    await sampler;
    const sizes = await Promise.all(
      children.map(async (_, index) => {
        const text = await (await fetch(`${base(index)}/metrics`)).text();
        return Number(/^leasehold_db_pool_max (\d+)/m.exec(text)?.[1] ?? 0);
      }),
    );
    console.log(
      JSON.stringify({
        brokers,
        seconds,
        maxConnections: Number(maxConnections),
        poolSizes: [...new Set(sizes)],
        peakConnections: peak,
        pushedPerSecond: Math.round(pushed / seconds),
        poppedPerSecond: Math.round(popped / seconds),
        wakeups: wakeups.length,
        failedWakeups: failed,
        wakeP50: percentile(wakeups, 0.5),
        wakeP99: percentile(wakeups, 0.99),
        wakeMax: Math.max(...wakeups),
      }),
    );
  } finally {
    sampling = false;
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGTERM');
        await exited;
      }),
    );
    await admin.end();
    await dropDatabase(ADMIN_URL, DATABASE);
  }
}

function base(index: number): string {
  return `http://127.0.0.1:${FIRST_PORT + index}`;
}

function startBroker(index: number, databaseUrl: string): ChildProcess {
  const child = spawn(process.execPath, [...startFlags(ROOT), join(ROOT, 'dist', 'src', 'main.js')], {
    env: {
      ...process.env,
      PORT: String(FIRST_PORT + index),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      JWT_ENABLED: 'false',
      NODE_ENV: 'production',
      LOG_REQUESTS: 'false',
      LOG_LEVEL: 'warn',
      BROKER_HEARTBEAT_MS: '1000',
      RATE_LIMIT_CONSUME: '0',
      RATE_LIMIT_PRODUCE: '0',
      ...EXTRA_ENV,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

async function post(url: string, path: string, body: unknown): Promise<number> {
  try {
    const answer = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await answer.text();
    return answer.status;
  } catch {
    return 0;
  }
}

async function untilReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 1_200; attempt += 1) {
    const ready = await fetch(`${url}/health/ready`).then(
      (answer) => answer.ok,
      () => false,
    );
    if (ready) return;
    await sleep(100);
  }
  throw new Error(`${url} did not become ready`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
