import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { Client } from 'pg';
import { createLeases } from './leases';
import { startFlags } from './start-flags';
import { cpuSeconds, rss } from './usage';

/*
 * `npm run bench:ab -- <other checkout>`: two builds side by side on this
 * machine, the other checkout's (built, e.g. an earlier commit in a git
 * worktree) and this one's, each started as its own `npm start` starts it in
 * production (NODE_ENV=production, its log read from a pipe), each with a
 * fresh database on the same PostgreSQL and 2000 live leases. After a
 * warm-up, rounds alternate between them, so a drift of the machine hits
 * both: extend at 50 connections, then push of 100 items from 10
 * connections over 10 partitions. Prints the medians as a Markdown table
 * with the broker's CPU per request; not part of CI.
 */

const ROOT = join(__dirname, '..', '..');
const ADMIN_URL = process.env.BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const LEASES = 2000;
const PUSH_ITEMS = Number(process.env.BENCH_PUSH_ITEMS ?? 100);
const PUSH_PARTITIONS = 10;

interface Round {
  requestsPerSecond: number;
  p99: number;
  errors: number;
  /** Broker CPU ms per request. */
  cpuMs: number;
  rssMb: number;
}

interface Side {
  name: string;
  root: string;
  port: number;
  process?: ChildProcess;
  leases: string[];
  rounds: Record<Workload, Round[]>;
}

type Workload = 'extend' | 'push';

const PUSH_BODIES = Array.from({ length: PUSH_PARTITIONS }, (_unused, partition) =>
  JSON.stringify({
    items: Array.from({ length: PUSH_ITEMS }, (_item, index) => ({
      queue: 'ab-push',
      partition: `p${partition}`,
      payload: { index, body: 'x'.repeat(100) },
    })),
  }),
);

async function main(): Promise<void> {
  const other = process.argv[2];
  if (!other) throw new Error('usage: npm run bench:ab -- <path of the other checkout, built>');
  const sides: Side[] = [
    { name: 'other', root: other, port: 6720, leases: [], rounds: { extend: [], push: [] } },
    { name: 'this', root: ROOT, port: 6721, leases: [], rounds: { extend: [], push: [] } },
  ];
  try {
    for (const side of sides) {
      const url = await freshDatabase(`leasehold_ab_${side.name}`);
      side.process = spawn(process.execPath, [...startFlags(side.root), join(side.root, 'dist', 'src', 'main.js')], {
        env: {
          ...process.env,
          NODE_ENV: 'production',
          PORT: String(side.port),
          HOST: '127.0.0.1',
          DATABASE_URL: url,
          // One tenant renews here more often than the default per-tenant limit allows: raised, not off.
          RATE_LIMIT_RENEW: '10000000',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      side.process.stdout?.resume();
      await untilReady(`http://127.0.0.1:${side.port}`);
      side.leases = await createLeases(`http://127.0.0.1:${side.port}`, LEASES);
      await round(side, 'extend', 3);
      await round(side, 'push', 3);
    }
    for (let index = 0; index < ROUNDS; index += 1) {
      for (const workload of ['extend', 'push'] as const) {
        for (const side of index % 2 === 0 ? sides : [...sides].reverse()) {
          side.rounds[workload].push(await round(side, workload, SECONDS));
        }
      }
    }
  } finally {
    for (const side of sides) side.process?.kill('SIGTERM');
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(
    `| build | workload | req/s (median of ${ROUNDS}) | messages/s | p99 ms (median) | broker CPU ms per request | max RSS MB | errors | rounds (req/s at p99 ms) |`,
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const workload of ['extend', 'push'] as const) {
    for (const side of sides) {
      const rounds = side.rounds[workload];
      const requests = median(rounds.map((r) => r.requestsPerSecond));
      console.log(
        `| ${side.name === 'this' ? 'this checkout' : side.root} | ${workload === 'extend' ? 'extend, 50 connections' : `push, 10 connections × ${PUSH_ITEMS} items`} | ` +
          `${requests} | ${workload === 'push' ? requests * PUSH_ITEMS : ''} | ${median(rounds.map((r) => r.p99))} | ` +
          `${median(rounds.map((r) => r.cpuMs)).toFixed(3)} | ${Math.max(...rounds.map((r) => r.rssMb))} | ` +
          `${rounds.reduce((sum, r) => sum + r.errors, 0)} | ${rounds.map((r) => `${r.requestsPerSecond} at ${r.p99}`).join(', ')} |`,
      );
    }
  }
}

async function round(side: Side, workload: Workload, seconds: number): Promise<Round> {
  let sequence = 0;
  const request: autocannon.Request =
    workload === 'extend'
      ? {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"seconds":3600}',
          setupRequest: (sent) => ({
            ...sent,
            path: `/api/v1/lease/${side.leases[Math.floor(Math.random() * side.leases.length)]}/extend`,
          }),
        }
      : {
          method: 'POST',
          path: '/api/v1/push',
          headers: { 'content-type': 'application/json' },
          setupRequest: (sent) => ({ ...sent, body: PUSH_BODIES[sequence++ % PUSH_BODIES.length] }),
        };
  const cpuBefore = cpuSeconds(side.process!);
  const result = await autocannon({
    url: `http://127.0.0.1:${side.port}`,
    connections: workload === 'extend' ? 50 : 10,
    duration: seconds,
    requests: [request],
  });
  return {
    requestsPerSecond: Math.round(result.requests.average),
    p99: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    cpuMs: ((cpuSeconds(side.process!) - cpuBefore) * 1000) / Math.max(1, result.requests.total),
    rssMb: rss(side.process!),
  };
}

async function freshDatabase(name: string): Promise<string> {
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function untilReady(base: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt += 1) {
    const ready = await fetch(`${base}/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${base} did not become ready`);
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
