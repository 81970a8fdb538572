import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { ADMIN_URL, dropDatabase, recreateDatabase, vacuumAnalyze } from './database';
import { percentile, popAndAck, pushInBatches } from './http';
import { createLeases } from './leases';
import { measurePipeline } from './pipeline';
import { TcpProxy } from '../test/support/tcp-proxy';
import { startFlags } from './start-flags';
import { cpuFrom, rss } from './usage';

/*
 * `npm run bench:ab -- <other checkout>`: two builds side by side on this
 * machine, the other checkout's (built, e.g. an earlier commit in a git
 * worktree) and this one's, each started as its own `npm start` starts it in
 * production (NODE_ENV=production, its log read from a pipe), each with a
 * fresh database on the same PostgreSQL and 2000 live leases. After a
 * warm-up, rounds alternate between them, so a drift of the machine hits
 * both: extend at 50 connections, push of 100 items from 10 connections
 * over 10 partitions, and pop + ack (ACK_MESSAGES pushed untimed, then
 * drained by 4 consumers popping 100 and acking them), and the two-stage
 * pipeline through transactions (bench/pipeline.ts, its backlog; warmed up
 * PIPELINE_WARM_UP times, V8 compiling its path for that long). Prints the
 * medians as a Markdown table with the broker's CPU per request; not part of
 * CI.
 * BENCH_WORKLOADS picks workloads; BENCH_PUSH_TRANSACTION_IDS=1 gives each
 * pushed item a transactionId of its own; BENCH_DATABASE_DELAY_MS puts each
 * broker's database behind the tests' TCP proxy, holding every chunk that
 * long each way, as a database a network hop away is.
 */

const ROOT = join(__dirname, '..', '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const LEASES = 2000;
const PUSH_ITEMS = Number(process.env.BENCH_PUSH_ITEMS ?? 100);
const PUSH_PARTITIONS = 10;
const ACK_MESSAGES = Number(process.env.BENCH_ACK_MESSAGES ?? 40_000);
const ACK_QUEUE = 'ab-pop-ack';
const PIPELINE_WARM_UP = 5;
const DATABASE_DELAY_MS = Number(process.env.BENCH_DATABASE_DELAY_MS ?? 0);
/** Names each pipeline run's queues apart. */
let pipelineRuns = 0;

interface Round {
  requestsPerSecond: number;
  p99: number;
  errors: number;
  /** Broker CPU ms per request. */
  cpuMs: number;
  /** CPU ms per request of every PostgreSQL process. */
  postgresCpuMs: number;
  rssMb: number;
}

interface Side {
  name: string;
  root: string;
  databaseUrl?: string;
  port: number;
  process?: ChildProcess;
  proxy?: TcpProxy;
  leases: string[];
  rounds: Record<Workload, Round[]>;
}

const ALL_WORKLOADS = ['extend', 'push', 'pop + ack', 'pipeline'] as const;
type Workload = (typeof ALL_WORKLOADS)[number];
/** BENCH_WORKLOADS=push,extend runs only those. */
const WORKLOADS = ALL_WORKLOADS.filter((workload) =>
  (process.env.BENCH_WORKLOADS ?? ALL_WORKLOADS.join(',')).split(',').includes(workload),
);
/** BENCH_PUSH_TRANSACTION_IDS=1: each pushed item carries a transactionId of its own, as idempotent producers send. */
const PUSH_TRANSACTION_IDS = process.env.BENCH_PUSH_TRANSACTION_IDS === '1';
let pushedBodies = 0;

function pushBody(sequence: number): string {
  if (!PUSH_TRANSACTION_IDS) return PUSH_BODIES[sequence % PUSH_BODIES.length];
  const body = (pushedBodies += 1);
  return JSON.stringify({
    items: Array.from({ length: PUSH_ITEMS }, (_item, index) => ({
      queue: 'ab-push',
      partition: `p${sequence % PUSH_PARTITIONS}`,
      transactionId: `ab-${process.pid}-${body}-${index}`,
      payload: { index, body: 'x'.repeat(100) },
    })),
  });
}

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
    { name: 'other', root: other, port: 6720, leases: [], rounds: noRounds() },
    { name: 'this', root: ROOT, port: 6721, leases: [], rounds: noRounds() },
  ];
  try {
    for (const side of sides) {
      const url = await recreateDatabase(ADMIN_URL, `leasehold_ab_${side.name}`);
      side.databaseUrl = url;
      let brokerUrl = url;
      if (DATABASE_DELAY_MS > 0) {
        side.proxy = TcpProxy.forDatabaseUrl(url);
        await side.proxy.start();
        side.proxy.delay(DATABASE_DELAY_MS);
        brokerUrl = side.proxy.rewrite(url);
      }
      side.process = spawn(process.execPath, [...startFlags(side.root), join(side.root, 'dist', 'src', 'main.js')], {
        env: {
          ...process.env,
          NODE_ENV: 'production',
          PORT: String(side.port),
          HOST: '127.0.0.1',
          DATABASE_URL: brokerUrl,
          // One tenant renews here more often than the default per-tenant limit allows: raised, not off.
          RATE_LIMIT_RENEW: '10000000',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      side.process.stdout?.resume();
      await untilReady(`http://127.0.0.1:${side.port}`);
      side.leases = await createLeases(`http://127.0.0.1:${side.port}`, LEASES);
      for (const workload of WORKLOADS) {
        for (let warm = 0; warm < (workload === 'pipeline' ? PIPELINE_WARM_UP : 1); warm += 1) {
          await round(side, workload, 3);
        }
      }
    }
    for (let index = 0; index < ROUNDS; index += 1) {
      for (const workload of WORKLOADS) {
        for (const side of index % 2 === 0 ? sides : [...sides].reverse()) {
          side.rounds[workload].push(await round(side, workload, SECONDS));
        }
      }
    }
  } finally {
    await Promise.all(sides.map((side) => stopAndDrop(side)));
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  if (DATABASE_DELAY_MS > 0)
    console.log(`Each broker's database behind a proxy adding ${DATABASE_DELAY_MS} ms each way.\n`);
  console.log(
    `| build | workload | req/s (median of ${ROUNDS}) | messages/s | p99 ms (median) | broker CPU ms per request | PostgreSQL CPU ms per request | max RSS MB | errors | rounds (req/s at p99 ms) |`,
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  const names: Record<Workload, string> = {
    extend: 'extend, 50 connections',
    push: `push, 10 connections × ${PUSH_ITEMS} items`,
    'pop + ack': `pop + ack of ${ACK_MESSAGES} messages, batch 100, 4 consumers (a pop and its ack per request)`,
    pipeline: 'two-stage pipeline through transactions, backlog of 3,000 (messages/s as req/s, CPU per message)',
  };
  const messagesPerRequest: Record<Workload, number | undefined> = {
    extend: undefined,
    push: PUSH_ITEMS,
    'pop + ack': 100,
    pipeline: 1,
  };
  for (const workload of WORKLOADS) {
    for (const side of sides) {
      const rounds = side.rounds[workload];
      const requests = median(rounds.map((r) => r.requestsPerSecond));
      const messages = messagesPerRequest[workload];
      console.log(
        `| ${side.name === 'this' ? 'this checkout' : side.root} | ${names[workload]} | ` +
          `${requests} | ${messages === undefined ? '' : requests * messages} | ${median(rounds.map((r) => r.p99))} | ` +
          `${median(rounds.map((r) => r.cpuMs)).toFixed(3)} | ${median(rounds.map((r) => r.postgresCpuMs)).toFixed(3)} | ` +
          `${Math.max(...rounds.map((r) => r.rssMb))} | ` +
          `${rounds.reduce((sum, r) => sum + r.errors, 0)} | ${rounds.map((r) => `${r.requestsPerSecond} at ${r.p99}`).join(', ')} |`,
      );
    }
  }
}

async function round(side: Side, workload: Workload, seconds: number): Promise<Round> {
  if (workload === 'pop + ack') return popAckRound(side);
  if (workload === 'pipeline') return pipelineRound(side);
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
          setupRequest: (sent) => ({ ...sent, body: pushBody(sequence++) }),
        };
  const used = cpuFrom(side.process!);
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
    ...perRequest(used(), result.requests.total),
    rssMb: rss(side.process!),
  };
}

function perRequest(
  used: { broker: number; postgres: number },
  requests: number,
): Pick<Round, 'cpuMs' | 'postgresCpuMs'> {
  return {
    cpuMs: (used.broker * 1000) / Math.max(1, requests),
    postgresCpuMs: (used.postgres * 1000) / Math.max(1, requests),
  };
}

/** Seconds do not apply: the round lasts until the consumers have drained what was pushed. */
async function popAckRound(side: Side): Promise<Round> {
  const base = `http://127.0.0.1:${side.port}`;
  await pushInBatches(base, ACK_QUEUE, ACK_MESSAGES, PUSH_PARTITIONS, (index) => ({ index, body: 'x'.repeat(100) }));
  // Without this, each side would pop from tables left as its own push rounds grew them.
  await vacuumAnalyze(side.databaseUrl!);
  const latencies: number[] = [];
  let errors = 0;
  let acked = 0;
  const used = cpuFrom(side.process!);
  const started = performance.now();
  // A consumer that finds every partition leased by the others polls again, as a real one would: stopping at the
  // first 204 would make the figure depend on when each consumer happened to drop out.
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (acked < ACK_MESSAGES) {
        const began = performance.now();
        const step = await popAndAck(base, `/api/v1/pop/queue/${ACK_QUEUE}?batch=100&leaseSeconds=60`);
        if (step.failed) errors += 1;
        if (step.status !== 200) continue;
        acked += step.messages;
        latencies.push(performance.now() - began);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return {
    requestsPerSecond: Math.round(latencies.length / elapsed),
    p99: Math.round(percentile(latencies, 0.99)),
    errors: errors + acked - ACK_MESSAGES,
    ...perRequest(used(), latencies.length),
    rssMb: rss(side.process!),
  };
}

/** Seconds do not apply either: a backlog through stage one into stage two; p99 is stage one's. */
async function pipelineRound(side: Side): Promise<Round> {
  const used = cpuFrom(side.process!);
  const row = await measurePipeline(
    `http://127.0.0.1:${side.port}`,
    'transaction',
    'backlog',
    `-ab${(pipelineRuns += 1)}`,
  );
  return {
    requestsPerSecond: row.messagesPerSecond,
    p99: row.stageOneP99,
    errors: row.errors,
    ...perRequest(used(), row.messages),
    rssMb: rss(side.process!),
  };
}

function noRounds(): Record<Workload, Round[]> {
  return { extend: [], push: [], 'pop + ack': [], pipeline: [] };
}

/** The broker stopped, then its database dropped: a benchmark leaves nothing behind. */
async function stopAndDrop(side: Side): Promise<void> {
  const child = side.process;
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  await side.proxy?.stop();
  if (side.databaseUrl === undefined) return;
  await dropDatabase(ADMIN_URL, `leasehold_ab_${side.name}`);
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
