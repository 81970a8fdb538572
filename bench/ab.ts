import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { Client } from 'pg';
import { createLeases } from './leases';

/*
 * `npm run bench:ab -- <other checkout>`: the lease route of two builds side
 * by side on this machine, the other checkout's (built, e.g. an earlier
 * commit in a git worktree) and this one's. Each broker gets a fresh
 * database on the same PostgreSQL and 2000 live leases; after a warm-up,
 * rounds of extend at 50 connections alternate between them, so a drift of
 * the machine hits both, and the medians are compared. Prints a Markdown
 * table; not part of CI.
 */

const ROOT = join(__dirname, '..', '..');
const ADMIN_URL = process.env.BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const LEASES = 2000;

interface Side {
  name: string;
  root: string;
  port: number;
  process?: ChildProcess;
  leases: string[];
  rounds: Array<{ requestsPerSecond: number; p99: number; errors: number }>;
}

async function main(): Promise<void> {
  const other = process.argv[2];
  if (!other) throw new Error('usage: npm run bench:ab -- <path of the other checkout, built>');
  const sides: Side[] = [
    { name: 'other', root: other, port: 6720, leases: [], rounds: [] },
    { name: 'this', root: ROOT, port: 6721, leases: [], rounds: [] },
  ];
  try {
    for (const side of sides) {
      const url = await freshDatabase(`leasehold_ab_${side.name}`);
      side.process = spawn(process.execPath, ['--max-old-space-size=512', join(side.root, 'dist', 'src', 'main.js')], {
        env: {
          ...process.env,
          PORT: String(side.port),
          HOST: '127.0.0.1',
          DATABASE_URL: url,
          RATE_LIMIT_RENEW: '10000000',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      await untilReady(`http://127.0.0.1:${side.port}`);
      side.leases = await createLeases(`http://127.0.0.1:${side.port}`, LEASES);
      await round(side, 3);
    }
    for (let index = 0; index < ROUNDS; index += 1) {
      for (const side of index % 2 === 0 ? sides : [...sides].reverse()) side.rounds.push(await round(side, SECONDS));
    }
  } finally {
    for (const side of sides) side.process?.kill('SIGTERM');
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(`| build | req/s (median of ${ROUNDS}) | p99 ms (median) | errors | rounds (req/s at p99 ms) |`);
  console.log('| --- | ---: | ---: | ---: | --- |');
  for (const side of sides) {
    console.log(
      `| ${side.name === 'this' ? 'this checkout' : side.root} | ${median(side.rounds.map((r) => r.requestsPerSecond))} | ` +
        `${median(side.rounds.map((r) => r.p99))} | ${side.rounds.reduce((sum, r) => sum + r.errors, 0)} | ` +
        `${side.rounds.map((r) => `${r.requestsPerSecond} at ${r.p99}`).join(', ')} |`,
    );
  }
}

async function round(side: Side, seconds: number): Promise<{ requestsPerSecond: number; p99: number; errors: number }> {
  const result = await autocannon({
    url: `http://127.0.0.1:${side.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"seconds":3600}',
        setupRequest: (request) => ({
          ...request,
          path: `/api/v1/lease/${side.leases[Math.floor(Math.random() * side.leases.length)]}/extend`,
        }),
      },
    ],
  });
  return {
    requestsPerSecond: Math.round(result.requests.average),
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
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
