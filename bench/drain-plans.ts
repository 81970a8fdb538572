import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { ADMIN_URL, dropDatabase, recreateDatabase } from './database';
import { DrainRow, measureDrain } from './drain';
import { startFlags } from './start-flags';
import { cpuFrom, rss } from './usage';

/*
 * `node dist-bench/bench/drain-plans.js [rounds]`: the drain of bench/drain.ts
 * with and without fresh statistics, each run on a new database and broker
 * (`npm run bench` runs it once through drainOnFreshDatabase),
 * so "stale" is what the planner sees after a burst into empty tables (with
 * autovacuum off, or before its next pass). Prints one JSON line per run.
 * BENCH_BROKER_ROOT names another built checkout whose broker to run instead.
 */

const ROOT = join(__dirname, '..', '..');
const DATABASE = process.env.BENCH_DATABASE ?? 'leasehold_drain_plans';
const PARTITIONS = Number(process.env.BENCH_DRAIN_PARTITIONS ?? 5000);
const QUERIES = (process.env.BENCH_DRAIN_QUERIES ?? 'batch=10,batch=10&partitions=10').split(',');
const PORT = 6790;
const BROKER_ROOT = process.env.BENCH_BROKER_ROOT ?? ROOT;

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 1);
  for (let round = 0; round < rounds; round += 1) {
    for (const query of QUERIES) {
      for (const refresh of [false, true]) {
        console.log(JSON.stringify(await drainOnFreshDatabase(query, refresh)));
      }
    }
  }
}

export interface PlannedDrainRow extends DrainRow {
  statistics: 'stale' | 'analysed';
  /** The broker's RSS at the end of the drain, MB. */
  rssMb: number;
  /** CPU seconds per 1,000 messages drained, the broker's and PostgreSQL's. */
  cpu: { broker: number; postgres: number };
}

/** The drain on a new database and broker, statistics refreshed after loading or not. */
export async function drainOnFreshDatabase(query: string, refresh: boolean): Promise<PlannedDrainRow> {
  const url = await recreateDatabase(ADMIN_URL, DATABASE);
  const broker = spawn(process.execPath, [...startFlags(BROKER_ROOT), join(BROKER_ROOT, 'dist', 'src', 'main.js')], {
    env: {
      ...process.env,
      PORT: String(PORT),
      HOST: '127.0.0.1',
      DATABASE_URL: url,
      DB_POOL_SIZE: '10',
      JWT_ENABLED: 'false',
      NODE_ENV: 'production',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  broker.stdout?.resume();
  try {
    const base = `http://127.0.0.1:${PORT}`;
    await untilUp(base);
    let used = cpuFrom(broker);
    const row = await measureDrain(base, url, PARTITIONS, query, 'plans', refresh, () => {
      used = cpuFrom(broker);
    });
    const cpu = used();
    const perThousand = (seconds: number) => Math.round((seconds / Math.max(1, row.messages)) * 1000 * 100) / 100;
    return {
      statistics: refresh ? 'analysed' : 'stale',
      ...row,
      rssMb: rss(broker),
      cpu: { broker: perThousand(cpu.broker), postgres: perThousand(cpu.postgres) },
    };
  } finally {
    await stop(broker);
    // Nothing stays on the server once the drain is measured.
    await dropDatabase(ADMIN_URL, DATABASE);
  }
}

async function untilUp(base: string): Promise<void> {
  for (let attempt = 0; attempt < 150; attempt += 1) {
    const up = await fetch(`${base}/health`).then(
      (response) => response.ok,
      () => false,
    );
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${base} did not come up`);
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
