import { ChildProcess, execSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import autocannon, { Result } from 'autocannon';
import { drainOnFreshDatabase, PlannedDrainRow } from './drain-plans';
import { CeilingKind, measurePushCeiling } from './push-ceiling';
import { startFlags } from './start-flags';
import { cpuFrom, cpuSeconds, rss } from './usage';
import { measurePipeline, PipelineMode, PipelineRow } from './pipeline';
import { ADMIN_URL, databaseUrlOf, dropDatabase, recreateDatabase, vacuumAnalyze } from './database';
import { startScratchBroker } from './scratch-broker';
import { percentile, popAndAck, pushInBatches } from './http';
import { createHotLease, createLeases } from './leases';
import { measureSoak, SoakResult } from './soak';
import { IsolationRow, measureIsolation } from './tenants';
import { measureWakeups, WakeupRow } from './wakeups';

/*
 * `npm run bench`: starts the broker (real PostgreSQL, fresh database) and a
 * bare NestJS app as the framework's ceiling, measures both in the same run
 * with autocannon, and writes bench/RESULTS.md. Not part of CI.
 */

const ROOT = join(__dirname, '..', '..');
const DATABASE = process.env.BENCH_DATABASE ?? 'leasehold_bench';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const LEASES = Number(process.env.BENCH_LEASES ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const BROKER_PORT = 6700;
const CEILING_PORT = 6701;
const ISOLATION_PORT = 6702;
const SECOND_BROKER_PORT = 6703;
const SOAK_PORT = 6704;
const PUSH_FLOOR_PORT = 6705;
const COLD_PIPELINE_PORT = 6706;
const SOAK_SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 240);
const SOAK_RATE = Number(process.env.BENCH_SOAK_RATE ?? 800);
const REST_SECONDS = 5;
/** V8's memory reducer gave start-up's memory back 25 to 30 s after start on this machine. */
const SETTLED_SECONDS = 45;
const PUSH_ROUNDS = 3;
const DRAIN_PARTITIONS = Number(process.env.BENCH_DRAIN_PARTITIONS ?? 5000);
/** Text after this line in RESULTS.md is written by hand and kept across runs. */
const KEPT_MARKER = '<!-- Written by hand from here on; npm run bench keeps it. -->';
const ISOLATION_SECRET = 'bench-isolation-secret-of-enough-length';
const ISOLATION_METRICS_TOKEN = 'isolation-scrape-token-0123456789';
const BROKER = `http://127.0.0.1:${BROKER_PORT}`;

interface Row {
  scenario: string;
  connections: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  extra?: string;
  rssMb?: number;
  /** CPU seconds per 1,000 requests (or messages, where the row counts messages), the broker's and PostgreSQL's. */
  cpu?: CpuPerThousand;
  /** Requests answered in all. */
  total?: number;
}

interface CpuPerThousand {
  /** Absent on the node-postgres ceiling, which has no broker. */
  broker?: number;
  postgres: number;
}

/** BENCH_ONLY=isolation, soak, pipeline or workloads (the route, push, pop + ack and drain figures) runs those alone and prints them instead of writing RESULTS.md. */
async function main(): Promise<void> {
  await assertPortFree(BROKER_PORT);
  await assertPortFree(CEILING_PORT);
  await assertPortFree(ISOLATION_PORT);
  try {
    await measureAndReport();
  } finally {
    // The benchmark's databases are its own: none stays on the server after a run, finished or failed.
    await dropDatabase(ADMIN_URL, DATABASE);
    await dropDatabase(ADMIN_URL, `${DATABASE}_soak`);
  }
}

async function measureAndReport(): Promise<void> {
  await recreateDatabase(ADMIN_URL, DATABASE);
  if (process.env.BENCH_ONLY === 'isolation') {
    console.log(JSON.stringify(await measureTenantIsolation(), null, 2));
    return;
  }
  if (process.env.BENCH_ONLY === 'soak') {
    console.log(JSON.stringify(await measureSoakRun(), null, 2));
    return;
  }
  const { rows, pipelines, wakeups, restMb } = await measureThroughput();
  if (process.env.BENCH_ONLY === 'pipeline') {
    console.log(JSON.stringify(pipelines, null, 2));
    return;
  }
  const drains = await measureDrains();
  if (process.env.BENCH_ONLY === 'workloads') {
    console.log(JSON.stringify({ restMb, rows, drains }, null, 2));
    return;
  }
  const isolation = await measureTenantIsolation();
  writeResults({ restMb }, rows, drains, pipelines, wakeups, isolation, await measureSoakRun());
}

async function measureThroughput(): Promise<{
  restMb: { start: RestRss; end: RestRss };
  rows: Row[];
  pipelines: PipelineRow[];
  wakeups: WakeupRow[];
}> {
  const broker = start('broker', join(ROOT, 'dist', 'src', 'main.js'), [], {
    PORT: String(BROKER_PORT),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl(),
    DB_POOL_SIZE: process.env.BENCH_POOL_SIZE ?? '10',
    JWT_ENABLED: 'false',
    // Every default on, limits included. The one tenant here renews more often than RATE_LIMIT_RENEW's
    // default lets one tenant (1000/s): the limit is raised, not turned off, so its cost is still paid.
    RATE_LIMIT_RENEW: '10000000',
  });
  const ceiling = start('ceiling', join(ROOT, 'dist-bench', 'bench', 'ceiling-app.js'), [String(CEILING_PORT)], {});
  const rows: Row[] = [];
  const pipelines: PipelineRow[] = [];
  let wakeups: WakeupRow[] = [];
  const restMb = { start: { early: 0, settled: 0 }, end: { early: 0, settled: 0 } };
  try {
    await waitFor(`${BROKER}/health`);
    restMb.start = await rssAtRest(broker);
    await waitFor(`http://127.0.0.1:${CEILING_PORT}/api/v1/lease/x/extend`, 'POST');
    if (process.env.BENCH_ONLY === 'pipeline') {
      await measurePipelines(broker, pipelines);
      pipelines.push(...(await measureColdPipelines()));
      return { rows, pipelines, wakeups, restMb };
    }

    log(`creating ${LEASES} live leases through pop`);
    const leases = await createLeases(BROKER, LEASES);
    const hotLease = await createHotLease(BROKER, 10);
    log(`created ${leases.length} leases and one 10-partition hot lease`);

    const ceilingUrl = `http://127.0.0.1:${CEILING_PORT}`;
    const randomLease = () => leases[Math.floor(Math.random() * leases.length)];
    for (const connections of [1, 10]) {
      rows.push(await measure('ceiling: bare NestJS, fixed JSON', ceilingUrl, connections, () => leases[0]));
      rows.push(await withUsage(broker, () => measure('extend, random leases', BROKER, connections, randomLease)));
    }
    // This machine's throughput drifts from one run to the next, so at 50
    // connections the ceiling and the route alternate for ROUNDS rounds and
    // the medians are compared: a drift then hits both sides alike.
    const ceilingRounds: Row[] = [];
    const extendRounds: Row[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      ceilingRounds.push(await measure('ceiling: bare NestJS, fixed JSON', ceilingUrl, 50, () => leases[0]));
      extendRounds.push(await withUsage(broker, () => measure('extend, random leases', BROKER, 50, randomLease)));
    }
    rows.push(median(ceilingRounds), median(extendRounds));
    rows.push(await withUsage(broker, () => measure('extend, one hot 10-partition lease', BROKER, 50, () => hotLease)));

    // The two push workloads, the node-postgres ceilings and the bare node:http floor alternate too: one round each
    // is at the mercy of the machine.
    const floor = start(
      'push floor',
      join(ROOT, 'dist-bench', 'bench', 'push-floor-app.js'),
      [String(PUSH_FLOOR_PORT)],
      { DATABASE_URL: databaseUrl() },
      startFlags(ROOT),
    );
    try {
      await waitFor(`http://127.0.0.1:${PUSH_FLOOR_PORT}/`);
      const pushRounds: Row[][] = [[], [], [], [], []];
      for (let round = 0; round < PUSH_ROUNDS; round += 1) {
        pushRounds[0].push(await measurePush(broker, 10, 100));
        pushRounds[1].push(await measurePush(broker, 4, 1000));
        pushRounds[2].push(await measurePushCeilingRow('rows'));
        pushRounds[4].push(await measurePushCeilingRow('push'));
        pushRounds[3].push(await measurePush(floor, 10, 100, `http://127.0.0.1:${PUSH_FLOOR_PORT}`, PUSH_FLOOR));
      }
      const [push100, push1000, ceilingRow, floorRow, statementsRow] = pushRounds.map((rounds) => median(rounds));
      rows.push(push100, push1000, statementsRow, ceilingRow, {
        ...floorRow,
        extra: `${floorRow.extra}; its RSS and CPU columns are the floor process's`,
      });
    } finally {
      floor.kill('SIGTERM');
    }
    rows.push(await measurePopAck(broker));

    restMb.end = await rssAtRest(broker);
    if (process.env.BENCH_ONLY === 'workloads') return { rows, pipelines, wakeups, restMb };
    await measurePipelines(broker, pipelines);
    pipelines.push(...(await measureColdPipelines()));

    const second = start('second broker', join(ROOT, 'dist', 'src', 'main.js'), [], {
      PORT: String(SECOND_BROKER_PORT),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl(),
      DB_POOL_SIZE: '4',
      JWT_ENABLED: 'false',
    });
    try {
      await waitFor(`http://127.0.0.1:${SECOND_BROKER_PORT}/health`);
      log('wakeups: redelivery and delayed delivery to a parked poll, in the same and in another broker process');
      wakeups = await measureWakeups(BROKER, `http://127.0.0.1:${SECOND_BROKER_PORT}`, databaseUrl());
    } finally {
      second.kill('SIGTERM');
    }
  } finally {
    broker.kill('SIGTERM');
    ceiling.kill('SIGTERM');
  }
  await new Promise((resolve) => broker.once('exit', resolve));
  return { rows, pipelines, wakeups, restMb };
}

/** Each drain on a new database and broker, with the statistics a burst leaves and then refreshed (bench/drain-plans.ts). */
async function measureDrains(): Promise<PlannedDrainRow[]> {
  const drains: PlannedDrainRow[] = [];
  for (const query of ['batch=10', 'batch=10&partitions=10']) {
    for (const refresh of [false, true]) {
      log(
        `draining ${DRAIN_PARTITIONS} one-message partitions, ${query}, statistics ${refresh ? 'analysed' : 'stale'}`,
      );
      drains.push(await drainOnFreshDatabase(query, refresh));
    }
  }
  return drains;
}

async function measureTenantIsolation(): Promise<IsolationRow[]> {
  const isolated = start('isolation broker', join(ROOT, 'dist', 'src', 'main.js'), [], {
    PORT: String(ISOLATION_PORT),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl(),
    DB_POOL_SIZE: process.env.BENCH_POOL_SIZE ?? '10',
    JWT_ENABLED: 'true',
    JWT_SECRET: ISOLATION_SECRET,
    METRICS_TOKEN: ISOLATION_METRICS_TOKEN,
  });
  try {
    await waitFor(`http://127.0.0.1:${ISOLATION_PORT}/health`);
    log('tenant isolation: tenant B renews while tenant A misbehaves');
    return await measureIsolation(
      {
        base: `http://127.0.0.1:${ISOLATION_PORT}`,
        secret: ISOLATION_SECRET,
        metricsToken: ISOLATION_METRICS_TOKEN,
        rssMb: () => rss(isolated),
        databaseUrl: databaseUrl(),
      },
      SECONDS,
    );
  } finally {
    isolated.kill('SIGTERM');
  }
}

/** A broker as shipped, its retention job included, under steady traffic for SOAK_SECONDS (bench/soak.ts). */
async function measureSoakRun(): Promise<SoakResult> {
  // A database of its own: the rows other scenarios leave would be counted as the soak's.
  const database = `${DATABASE}_soak`;
  await recreateDatabase(ADMIN_URL, database);
  const soaked = start('soak broker', join(ROOT, 'dist', 'src', 'main.js'), [], {
    PORT: String(SOAK_PORT),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl(database),
    DB_POOL_SIZE: process.env.BENCH_POOL_SIZE ?? '10',
    JWT_ENABLED: 'false',
  });
  try {
    await waitFor(`http://127.0.0.1:${SOAK_PORT}/health`);
    log(`soak: ${SOAK_RATE} messages/s for ${SOAK_SECONDS} s with retention on`);
    return await measureSoak(`http://127.0.0.1:${SOAK_PORT}`, databaseUrl(database), SOAK_SECONDS, SOAK_RATE, () =>
      cpuSeconds(soaked),
    );
  } finally {
    soaked.kill('SIGTERM');
  }
}

function databaseUrl(database = DATABASE): string {
  return databaseUrlOf(ADMIN_URL, database);
}

async function assertPortFree(port: number): Promise<void> {
  const answered = await fetch(`http://127.0.0.1:${port}/`).then(
    () => true,
    () => false,
  );
  if (answered) throw new Error(`port ${port} is already in use: stop whatever listens there first`);
}

/**
 * A broker starts as `npm start` starts it in production: its flags,
 * NODE_ENV=production, and its log read from a pipe as a supervisor reads
 * it (a log written to /dev/null costs less than one somebody reads).
 */
function start(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  flags = name.endsWith('broker') ? startFlags(ROOT) : [],
): ChildProcess {
  const broker = name.endsWith('broker');
  const child = spawn(process.execPath, [...flags, script, ...args], {
    env: { ...process.env, ...(broker ? { NODE_ENV: 'production' } : {}), ...env },
    stdio: ['ignore', broker ? 'pipe' : 'ignore', 'inherit'],
  });
  child.stdout?.resume();
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM') {
      log(`${name} exited with ${code ?? signal}`);
      process.exit(1);
    }
  });
  return child;
}

async function waitFor(url: string, method = 'GET'): Promise<void> {
  for (let attempt = 0; attempt < 150; attempt += 1) {
    try {
      const response = await fetch(url, { method });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} did not come up`);
}

async function measure(scenario: string, base: string, connections: number, lease: () => string): Promise<Row> {
  const result = await autocannon({
    url: base,
    connections,
    duration: SECONDS,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"seconds":3600}',
        setupRequest: (request) => ({ ...request, path: `/api/v1/lease/${lease()}/extend` }),
      },
    ],
  });
  return summarise(scenario, connections, result);
}

const PUSH_QUEUE = 'bench-push';
const PUSH_FLOOR = "floor: bare node:http server running the rows ceiling's transaction";
const PUSH_ROWS_CEILING = "ceiling: node-postgres inserting the push's rows";
const PUSH_STATEMENTS_CEILING = "ceiling: node-postgres running the push's own statements";
const PUSH_PARTITIONS = 10;
const pushPayload = (index: number) => ({ index, body: 'x'.repeat(100) });

/** `connections` producers, each request `items` messages into one of 10 partitions in turn. */
async function measurePush(
  server: ChildProcess,
  connections: number,
  items: number,
  base = BROKER,
  scenario = 'push',
): Promise<Row> {
  const bodies = Array.from({ length: PUSH_PARTITIONS }, (_unused, partition) =>
    JSON.stringify({
      items: Array.from({ length: items }, (_item, index) => ({
        queue: PUSH_QUEUE,
        partition: `p${partition}`,
        payload: pushPayload(index),
      })),
    }),
  );
  let sequence = 0;
  const row = await withUsage(
    server,
    async () =>
      summarise(
        `${scenario}, ${connections} connections × ${items} items`,
        connections,
        await autocannon({
          url: base,
          connections,
          duration: SECONDS,
          requests: [
            {
              method: 'POST',
              path: '/api/v1/push',
              headers: { 'content-type': 'application/json' },
              setupRequest: (request) => ({ ...request, body: bodies[sequence++ % bodies.length] }),
            },
          ],
        }),
      ),
    items,
  );
  return { ...row, extra: `${Math.round(row.requestsPerSecond * items)} messages/s` };
}

/**
 * The push's own statements, or its rows alone, by node-postgres (bench/push-ceiling.ts), after a push workload
 * created the partitions.
 */
async function measurePushCeilingRow(kind: CeilingKind): Promise<Row> {
  const connections = 10;
  const items = 100;
  const result = await measurePushCeiling(databaseUrl(), PUSH_QUEUE, pushPayload, {
    connections,
    items,
    seconds: SECONDS,
    kind,
  });
  return {
    scenario: `${kind === 'push' ? PUSH_STATEMENTS_CEILING : PUSH_ROWS_CEILING}, ${connections} connections × ${items} items`,
    connections,
    requestsPerSecond: Math.round(result.messagesPerSecond / items),
    p50: result.p50,
    p99: result.p99,
    errors: 0,
    cpu: { postgres: result.postgresCpu },
    extra: `${result.messagesPerSecond} messages/s`,
  };
}

const POP_ACK_MESSAGES = Number(process.env.BENCH_POP_ACK_MESSAGES ?? 200_000);

/** POP_ACK_MESSAGES pushed over 10 partitions first, then drained by 4 consumers popping 100 and acking them. */
async function measurePopAck(broker: ChildProcess): Promise<Row> {
  const queue = 'bench-pop-ack';
  const consumers = 4;
  log(`pop + ack: pushing ${POP_ACK_MESSAGES} messages`);
  await pushInBatches(BROKER, queue, POP_ACK_MESSAGES, PUSH_PARTITIONS, pushPayload);
  await vacuumAnalyze(databaseUrl());
  const latencies: number[] = [];
  let messages = 0;
  let errors = 0;
  let elapsed = 0;
  const row = await withUsage(
    broker,
    async () => {
      const started = performance.now();
      await Promise.all(
        Array.from({ length: consumers }, async () => {
          for (;;) {
            const began = performance.now();
            const step = await popAndAck(BROKER, `/api/v1/pop/queue/${queue}?batch=100&leaseSeconds=60`);
            if (step.status === 204) break;
            if (step.failed) errors += 1;
            if (step.status !== 200) continue;
            messages += step.messages;
            latencies.push(performance.now() - began);
          }
        }),
      );
      elapsed = (performance.now() - started) / 1000;
      return {
        scenario: `pop + ack of ${POP_ACK_MESSAGES} messages, batch 100, 10 partitions, ${consumers} consumers`,
        connections: consumers,
        requestsPerSecond: Math.round(latencies.length / elapsed),
        p50: Math.round(percentile(latencies, 0.5) * 10) / 10,
        p99: Math.round(percentile(latencies, 0.99) * 10) / 10,
        errors: errors + Math.abs(POP_ACK_MESSAGES - messages),
      };
    },
    () => messages,
  );
  return {
    ...row,
    extra: `${Math.round(messages / elapsed)} messages/s in ${elapsed.toFixed(1)} s (pop+ack round trips in the req/s column)`,
  };
}

/** The broker's RSS in MB after REST_SECONDS without requests, and after SETTLED_SECONDS. */
interface RestRss {
  early: number;
  settled: number;
}

async function rssAtRest(broker: ChildProcess): Promise<RestRss> {
  await new Promise((resolve) => setTimeout(resolve, REST_SECONDS * 1000));
  const early = rss(broker);
  await new Promise((resolve) => setTimeout(resolve, (SETTLED_SECONDS - REST_SECONDS) * 1000));
  return { early, settled: rss(broker) };
}

/**
 * Runs a measurement and adds the broker's RSS at its end and the CPU it and
 * PostgreSQL used per 1,000 of what it counts: requests by default, or
 * `units` per request when it is a number, or what `units` reports.
 */
async function withUsage(
  broker: ChildProcess,
  measurement: () => Promise<Row>,
  units: number | (() => number) = 1,
): Promise<Row> {
  const used = cpuFrom(broker);
  const row = await measurement();
  const cpu = used();
  const counted = typeof units === 'function' ? units() : (row.total ?? 0) * units;
  const perThousand = (used: number) => Math.round((used / Math.max(1, counted)) * 1000 * 1000) / 1000;
  return {
    ...row,
    rssMb: rss(broker),
    cpu: { broker: perThousand(cpu.broker), postgres: perThousand(cpu.postgres) },
  };
}

/**
 * The round with the median throughput, with the median of the rounds' p99s
 * (the two medians may come from different rounds), annotated with every
 * round's figures.
 */
function median(rounds: Row[]): Row {
  const row = middle(rounds, (round) => round.requestsPerSecond);
  return {
    ...row,
    p99: middle(rounds, (round) => round.p99).p99,
    errors: rounds.reduce((sum, round) => sum + round.errors, 0),
    rssMb: rounds.some((round) => round.rssMb !== undefined)
      ? Math.max(...rounds.map((round) => round.rssMb ?? 0))
      : undefined,
    extra:
      `${row.extra ? `${row.extra}; ` : ''}medians of ${rounds.length} alternating rounds (req/s at p99 ms): ` +
      `${rounds.map((round) => `${round.requestsPerSecond} at ${round.p99}`).join(', ')}; errors summed`,
  };
}

/** The element at the median of `by` (with an even count, the upper of the two middle ones). */
function middle<T>(values: T[], by: (value: T) => number): T {
  return [...values].sort((a, b) => by(a) - by(b))[Math.floor(values.length / 2)];
}

function summarise(scenario: string, connections: number, result: Result): Row {
  return {
    scenario,
    connections,
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    total: result.requests.total,
  };
}

const WARM_UP_RUNS = 5;

/**
 * Every mode runs WARM_UP_RUNS times unmeasured first: the modes share one broker, so without it the first mode
 * measured would pay the whole process's warm-up, and V8 goes on optimising the routes' code for four to six runs of
 * 3,000 messages (a rule on the CPU's fall stopped early on the machine's noise). A broker that has served for minutes
 * is past that; what a new one pays is the cold rows'. Then the backlog with the modes alternating, BACKLOG_ROUNDS
 * times (one run of 3,000 messages moves by a quarter on this machine's noise), and the steady phase, so that a drift
 * of the machine hits the modes alike.
 */
async function measurePipelines(broker: ChildProcess, pipelines: PipelineRow[]): Promise<void> {
  const modes: PipelineMode[] = ['transaction', 'push then ack', 'stream cycle', 'stream window'];
  const warmUps = new Map<PipelineMode, number[]>();
  for (const mode of modes) {
    const cpu: number[] = [];
    while (cpu.length < WARM_UP_RUNS) {
      const row = await pipelineWithCpu(broker, BROKER, mode, 'backlog', `-warm-up-${cpu.length}`);
      cpu.push(row.brokerCpuMs ?? 0);
      log(`two-stage pipeline, warm-up (unmeasured): ${mode} ${row.messagesPerSecond} messages/s, ${cpu.at(-1)} ms`);
    }
    warmUps.set(mode, cpu);
  }
  const backlogs = new Map<PipelineMode, PipelineRow[]>();
  for (let round = 0; round < BACKLOG_ROUNDS; round += 1) {
    for (const mode of modes) {
      log(`two-stage pipeline, backlog, round ${round + 1}: ${mode}`);
      const row = await pipelineWithCpu(broker, BROKER, mode, 'backlog', `-${round}`);
      backlogs.set(mode, [...(backlogs.get(mode) ?? []), row]);
    }
  }
  for (const mode of modes) pipelines.push({ ...medianPipeline(backlogs.get(mode) ?? []), warmUp: warmUps.get(mode) });
  for (const mode of modes) {
    log(`two-stage pipeline, steady: ${mode}`);
    pipelines.push(await pipelineWithCpu(broker, BROKER, mode, 'steady'));
  }
}

const BACKLOG_ROUNDS = 3;

/** The run of median throughput, with the medians of the CPU columns (a run's CPU and throughput vary apart). */
function medianPipeline(rows: PipelineRow[]): PipelineRow {
  const cpu = (pick: (row: PipelineRow) => number | undefined) => pick(middle(rows, (row) => pick(row) ?? 0));
  return {
    ...middle(rows, (row) => row.messagesPerSecond),
    brokerCpuMs: cpu((row) => row.brokerCpuMs),
    postgresCpuMs: cpu((row) => row.postgresCpuMs),
    errors: rows.reduce((sum, row) => sum + row.errors, 0),
  };
}

/** A pipeline's row with the CPU the broker and PostgreSQL spent on it, in milliseconds a message. */
async function pipelineWithCpu(
  broker: ChildProcess,
  base: string,
  mode: PipelineMode,
  phase: 'backlog' | 'steady',
  run = '',
): Promise<PipelineRow> {
  const used = cpuFrom(broker);
  const row = await measurePipeline(base, mode, phase, run);
  const cpu = used();
  const perMessage = (seconds: number) => Math.round((seconds / Math.max(1, row.messages)) * 1000 * 1000) / 1000;
  return { ...row, brokerCpuMs: perMessage(cpu.broker), postgresCpuMs: perMessage(cpu.postgres) };
}

const COLD_ROUNDS = 3;

/**
 * The backlog as a new broker process on a new database drains it first, as after a deploy or a restart: what the C++
 * broker's side-by-side figure measured. Transactions and push then ack alternate for COLD_ROUNDS rounds, a broker and
 * a database each; the medians by messages per second.
 */
async function measureColdPipelines(): Promise<PipelineRow[]> {
  const rounds = new Map<PipelineMode, PipelineRow[]>();
  for (let round = 0; round < COLD_ROUNDS; round += 1) {
    for (const mode of ['transaction', 'push then ack'] as PipelineMode[]) {
      log(`two-stage pipeline, cold (a new broker), round ${round + 1}: ${mode}`);
      const scratch = await startScratchBroker({
        adminUrl: ADMIN_URL,
        database: `${DATABASE}_cold`,
        root: ROOT,
        port: COLD_PIPELINE_PORT,
        env: { DB_POOL_SIZE: process.env.BENCH_POOL_SIZE ?? '10', RATE_LIMIT_RENEW: '10000000' },
      });
      try {
        const row = await pipelineWithCpu(scratch.process, scratch.base, mode, 'backlog');
        rounds.set(mode, [...(rounds.get(mode) ?? []), { ...row, phase: 'cold' }]);
      } finally {
        await scratch.stop();
      }
    }
  }
  return [...rounds.values()].map(medianPipeline);
}

/** The backlog's ratios the targets name: transactions against push-then-ack, stream cycles against transactions. */
function pipelineRatios(pipelines: PipelineRow[]): string[] {
  const rate = (mode: PipelineMode) =>
    pipelines.find((row) => row.phase === 'backlog' && row.mode === mode)?.messagesPerSecond;
  const [transaction, split, stream] = [rate('transaction'), rate('push then ack'), rate('stream cycle')];
  if (transaction === undefined || split === undefined || stream === undefined) return [];
  const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 100) / 100);
  const cpu = pipelines.find((row) => row.phase === 'backlog' && row.mode === 'transaction')?.brokerCpuMs ?? 0;
  const cold = pipelines.find((row) => row.phase === 'cold' && row.mode === 'transaction');
  return [
    `- backlog, transaction ÷ push then ack: ${ratio(transaction, split)}× (target ≥ 1.1×): ` +
      (transaction >= 1.1 * split ? 'met' : '**missed**'),
    `- backlog, broker CPU per message through transactions: ${cpu} ms (target ≤ 0.3 ms): ` +
      (cpu <= 0.3 ? 'met' : '**missed**'),
    `- backlog, transaction against the C++ broker's ${CXX.pipeline} messages/s: ${ratio(transaction, CXX.pipeline)}× ` +
      `(for reference: this broker is warm, the C++ figure was taken cold)`,
    ...(cold === undefined
      ? []
      : [
          `- cold (a new broker's first pipeline, medians of ${COLD_ROUNDS}), transaction against the C++ broker's ` +
            `${CXX.pipeline} messages/s, also cold: ${ratio(cold.messagesPerSecond, CXX.pipeline)}× (target ≥ 1.3×; ` +
            `its figure is from another day on another machine): ${cold.messagesPerSecond >= 1.3 * CXX.pipeline ? 'met' : '**missed**'}; ` +
            `broker CPU ${cold.brokerCpuMs} ms a message`,
        ]),
    `- backlog, stream cycle (with its state read) ÷ transaction: ${ratio(stream, transaction)}×`,
    `- backlog, tumbling-window sum over 8 partitions (a state read and a cycle per batch): ${rate('stream window') ?? 0} source messages/s`,
  ];
}

/**
 * The C++ broker's figures from its side-by-side run on this machine on 2026-12-04 (medians of 3 rounds, the
 * pipeline cold); the p99 of extend is the earlier run's, the only one that recorded it.
 */
const CXX = { extend50: 4691, extendP99: 39.7, push100: 21040, push1000: 27007, pipeline: 1255 };

function writeResults(
  usage: { restMb: { start: RestRss; end: RestRss } },
  rows: Row[],
  drains: PlannedDrainRow[],
  pipelines: PipelineRow[],
  wakeups: WakeupRow[],
  isolation: IsolationRow[],
  soak: SoakResult,
): void {
  const find = (scenario: string, connections: number) =>
    rows.find((row) => row.scenario.startsWith(scenario) && row.connections === connections);
  const ceiling50 = find('ceiling', 50)!;
  const extend50 = find('extend, random', 50)!;
  const hot50 = find('extend, one hot', 50)!;
  const push100 = find('push, 10 connections', 10)!;
  const push1000 = find('push, 4 connections', 4)!;
  const pushCeiling = find(PUSH_STATEMENTS_CEILING, 10)!;
  const rowsCeiling = find(PUSH_ROWS_CEILING, 10)!;
  const pushFloor = find(PUSH_FLOOR, 10)!;
  const ratio = (row: Row, base: Row) => (row.requestsPerSecond / base.requestsPerSecond).toFixed(2);
  const maxRss = Math.max(...rows.filter((row) => row !== pushFloor).map((row) => row.rssMb ?? 0));
  const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
  const postgres = execSync(`psql "${ADMIN_URL}" -tAc 'SHOW server_version'`).toString().trim();

  const lines = [
    '# Benchmark results',
    '',
    `Run ${new Date().toISOString()} by \`npm run bench\` (${SECONDS} s per scenario; at 50 connections the ceiling and the extend route alternate for ${ROUNDS} rounds and the medians of their throughputs and of their p99s are shown).`,
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 1024 ** 3)} GiB RAM; ` +
      `Node ${process.version}; PostgreSQL ${postgres}; broker, PostgreSQL and load generator (autocannon) on the same machine. ` +
      `Broker: one process started as \`npm start\` does (\`${startFlags(ROOT).join(' ')}\`), pool ${process.env.BENCH_POOL_SIZE ?? '10'}, auth off. ${LEASES} live leases created through pop.`,
    '',
    `Broker RSS at rest: ${usage.restMb.start.early} MB ${REST_SECONDS} s after start and ${usage.restMb.start.settled} MB after ${SETTLED_SECONDS} s, ` +
      `once V8's memory reducer has given start-up's memory back; ${usage.restMb.end.early} and ${usage.restMb.end.settled} MB after the workloads below. ` +
      'CPU columns: seconds of CPU per 1,000 requests (per 1,000 messages on push and pop + ack rows), the broker process and all PostgreSQL processes.',
    '',
    '| scenario | connections | req/s | p50 ms | p99 ms | errors | broker RSS MB | broker CPU s/1k | PostgreSQL CPU s/1k | notes |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...rows.map(
      (row) =>
        `| ${row.scenario} | ${row.connections} | ${row.requestsPerSecond} | ${row.p50} | ${row.p99} | ${row.errors} | ${row.rssMb ?? ''} | ${row.cpu?.broker ?? ''} | ${row.cpu?.postgres ?? ''} | ${row.extra ?? ''} |`,
    ),
    '',
    '## Targets',
    '',
    `The C++ broker's figures are those of its side-by-side run on this machine (Queen built from its public source at \`-O3\`, 2 workers, pool 20); it cannot be built here, so they are not re-measured.`,
    '',
    `- extend at 50 connections / bare-Nest ceiling = ${ratio(extend50, ceiling50)} (target ≥ 0.9): ${verdict(extend50.requestsPerSecond >= 0.9 * ceiling50.requestsPerSecond)}`,
    `- extend at 50 connections = ${extend50.requestsPerSecond} req/s against the C++ broker's ${CXX.extend50} (target ≥ 1.3×, ${Math.round(1.3 * CXX.extend50)}): ${(extend50.requestsPerSecond / CXX.extend50).toFixed(2)}×, ${verdict(extend50.requestsPerSecond >= 1.3 * CXX.extend50)}`,
    `- extend p99 at 50 connections = ${extend50.p99} ms (target ≤ the C++ broker's ${CXX.extendP99} ms): ${verdict(extend50.p99 <= CXX.extendP99)}`,
    `- extend errors = ${extend50.errors} (target 0): ${verdict(extend50.errors === 0)}`,
    `- hot lease / random leases = ${ratio(hot50, extend50)} (target ≥ 0.5), errors ${hot50.errors}: ${verdict(hot50.requestsPerSecond >= 0.5 * extend50.requestsPerSecond && hot50.errors === 0)}`,
    `- push 10 × 100 / node-postgres running the push's own statements = ${ratio(push100, pushCeiling)} (target ≥ 0.8): ${verdict(push100.requestsPerSecond >= 0.8 * pushCeiling.requestsPerSecond)}`,
    `- for reference, not a target: the bare node:http floor reaches ${ratio(pushFloor, rowsCeiling)} of node-postgres inserting the push's rows alone (the transaction it runs), and push 10 × 100 ${ratio(push100, pushFloor)} of the floor: what serving HTTP in Node costs here, and what the broker adds to it and to its writes`,
    `- push 10 × 100 = ${push100.requestsPerSecond * 100} messages/s against the C++ broker's ${CXX.push100} (target ≥ 1.2×): ${((push100.requestsPerSecond * 100) / CXX.push100).toFixed(2)}×, ${verdict(push100.requestsPerSecond * 100 >= 1.2 * CXX.push100)}`,
    `- push 4 × 1000 = ${push1000.requestsPerSecond * 1000} messages/s against the C++ broker's ${CXX.push1000} (target ≥ 1.2×): ${((push1000.requestsPerSecond * 1000) / CXX.push1000).toFixed(2)}×, ${verdict(push1000.requestsPerSecond * 1000 >= 1.2 * CXX.push1000)}`,
    `- broker RSS at rest = ${usage.restMb.start.settled} MB ${SETTLED_SECONDS} s after start and ${usage.restMb.end.settled} MB ${SETTLED_SECONDS} s after the workloads (${usage.restMb.start.early} and ${usage.restMb.end.early} MB after ${REST_SECONDS} s, before V8's memory reducer) (target ≤ 100 MB): ${verdict(Math.max(usage.restMb.start.settled, usage.restMb.end.settled) <= 100)}`,
    `- broker RSS through the workloads = ${maxRss} MB at most (target ≤ 100 MB): ${verdict(maxRss <= 100)}`,
    `- broker RSS through the workloads ÷ the bare node:http floor's under push 10 × 100 (${pushFloor.rssMb} MB) = ` +
      `${(maxRss / Math.max(1, pushFloor.rssMb ?? 0)).toFixed(2)} (target ≤ 1.4): ${verdict(maxRss <= 1.4 * (pushFloor.rssMb ?? 0))}`,
    ...['batch=10', 'partitions=10'].map((query) => {
      const stale = drains.find((row) => row.statistics === 'stale' && row.scenario.endsWith(query))!;
      const analysed = drains.find((row) => row.statistics === 'analysed' && row.scenario.endsWith(query))!;
      return (
        `- drain, ${query}: ${stale.messagesPerSecond} messages/s on stale statistics, ${analysed.messagesPerSecond} analysed ` +
        `(target: stale within 20 %): ${verdict(stale.messagesPerSecond >= 0.8 * analysed.messagesPerSecond)}`
      );
    }),
    `- drain, partitions=10: at least 1000 messages/s either way: ${verdict(drains.filter((row) => row.scenario.endsWith('partitions=10')).every((row) => row.messagesPerSecond >= 1000))}`,
    '',
    '## Draining many partitions',
    '',
    `${DRAIN_PARTITIONS} partitions of one message each, pushed in batches of 500 into a new database with its own broker, ` +
      'then drained by 4 consumers of one group, each popping without wait and acking what it got until the queue answers 204; ' +
      'once with the statistics the burst leaves (stale: what a new tenant sees until autovacuum passes), once after `VACUUM ANALYZE`. ' +
      'Messages per second from the first pop to the last ack; pop and ack latencies in ms as each consumer saw them; CPU seconds per 1,000 messages.',
    '',
    '| scenario | statistics | consumers | messages | seconds | messages/s | pops | pop p50 | pop p99 | ack p50 | ack p99 | errors | broker RSS MB | broker CPU s/1k | PostgreSQL CPU s/1k |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...drains.map(
      (row) =>
        `| ${row.scenario} | ${row.statistics} | ${row.consumers} | ${row.messages} | ${row.seconds} | ${row.messagesPerSecond} | ${row.pops} | ${row.popP50} | ${row.popP99} | ${row.ackP50} | ${row.ackP99} | ${row.errors} | ${row.rssMb} | ${row.cpu.broker} | ${row.cpu.postgres} |`,
    ),
    '',
    '## A two-stage pipeline',
    '',
    'Stage one (4 workers) pops batches of 10 from one queue of 8 partitions and, for each batch, acks its input and pushes ' +
      'its output to a second queue, either in one `POST /api/v1/transaction` (with its lease required and each epoch sent) ' +
      "or as a push followed by an ack, or as Queen's streaming SDK would keep a running sum per partition (a state read, " +
      'then one `POST /streams/v1/cycle` of the state write, the pushes and the ack of the last message), or a ' +
      'tumbling-window sum per partition (windows of 25 messages; the cycle emits each window a later event closed, ' +
      'deletes its state and keeps the open ones; its rows count source messages, stage two takes one per window); stage two ' +
      '(4 workers) pops the output and acks it. Backlog: 3000 messages pushed ' +
      'first, end-to-end messages per second until the last is acked at stage two. Steady: 300 messages/s fed for 8 s; ' +
      'milliseconds from the push to the ack at stage two, and for stage one from its pop answer to its output committed. ' +
      `Backlog rows: the modes alternated for ${BACKLOG_ROUNDS} rounds, the run of median throughput with the medians ` +
      'of the CPU columns and the errors summed. ' +
      `Cold: the backlog drained by a new broker on a new database, its first pipeline (as after a deploy or a restart; ` +
      `transaction and push then ack alternated for ${COLD_ROUNDS} rounds, a broker each, the medians as above); the other rows ` +
      `ran on the broker of the workloads above, each mode first run ${WARM_UP_RUNS} times unmeasured (its broker CPU ` +
      'per message run by run is listed below the table). ' +
      'Every output must reach stage two exactly once (errors otherwise).',
    '',
    '| phase | stage one | messages | messages/s | end-to-end p50 | end-to-end p99 | stage one p50 | stage one p99 | errors | broker CPU ms/message | PostgreSQL CPU ms/message |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...pipelines.map(
      (row) =>
        `| ${row.phase} | ${row.mode} | ${row.messages} | ${row.messagesPerSecond} | ${row.endToEndP50} | ${row.endToEndP99} | ${row.stageOneP50} | ${row.stageOneP99} | ${row.errors} | ${row.brokerCpuMs ?? ''} | ${row.postgresCpuMs ?? ''} |`,
    ),
    '',
    ...pipelines
      .filter((row) => row.warmUp !== undefined)
      .map((row) => `- warm-up of ${row.mode}, broker CPU ms a message run by run: ${(row.warmUp ?? []).join(', ')}`),
    ...pipelineRatios(pipelines),
    '',
    '## Redelivery to a parked consumer',
    '',
    'A batch held through the main broker is nacked, or its 1 s lease left to expire, or a message of a queue with ' +
      'delayedProcessing 1 is pushed, while a long poll of the same group is parked in the same process or in a second ' +
      "broker process on the same database (pool 4). Milliseconds from the nack's answer, or from the lease's expiry or " +
      "the message's due instant by the database clock, to the parked poll's answer; 5 rounds at a time.",
    '',
    '| scenario | rounds | p50 | p99 | max | errors |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...wakeups.map(
      (row) => `| ${row.scenario} | ${row.rounds} | ${row.p50} | ${row.p99} | ${row.max} | ${row.errors} |`,
    ),
    '',
    ...wakeups.map(
      (row) =>
        `- ${row.scenario}: max ${row.max} ms (target ≤ 1000 ms), errors ${row.errors}: ${verdict(row.max <= 1000 && row.errors === 0)}`,
    ),
    '',
    '## Tenant isolation',
    '',
    'A second broker, auth on (HS256), pool ' +
      (process.env.BENCH_POOL_SIZE ?? '10') +
      ', every limit at its default. ' +
      `Tenant B renews its one-row lease in a loop, one request at a time and at most 500 a second (half its own renewal limit), for ${SECONDS} s while the attacker runs; ` +
      'the attacker starts a second earlier. Victim latencies in ms.',
    '',
    '| attacker | victim renewals | p50 | p99 | max | victim errors | broker RSS MB | attacker answers |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...isolation.map(
      (row) =>
        `| ${row.scenario} | ${row.victimRenewals} | ${row.victimP50} | ${row.victimP99} | ${row.victimMax} | ${row.victimErrors} | ${row.brokerRssMb ?? ''} | ${row.attacker} |`,
    ),
    '',
    ...isolation.map(
      (row) =>
        `- ${row.scenario}: victim p99 ${row.victimP99} ms (target ≤ 300 ms), errors ${row.victimErrors}: ` +
        verdict(row.victimP99 <= 300 && row.victimErrors === 0),
    ),
    '',
    ...soakLines(soak, verdict),
  ];
  const path = join(ROOT, 'bench', 'RESULTS.md');
  const previous = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const kept = previous.includes(KEPT_MARKER) ? previous.slice(previous.indexOf(KEPT_MARKER)) : `${KEPT_MARKER}\n`;
  writeFileSync(path, `${lines.join('\n')}\n${kept}`);
  log(lines.join('\n'));
}

function soakLines(soak: SoakResult, verdict: (ok: boolean) => string): string[] {
  const [first, last] = soak.minutes;
  const tail = soak.samples.slice(Math.floor(soak.samples.length / 2));
  const peak = Math.max(...soak.samples.map((sample) => sample.rows));
  const lastHalfMax = Math.max(...tail.map((sample) => sample.rows));
  const firstHalfMax = Math.max(...soak.samples.slice(0, Math.floor(soak.samples.length / 2)).map((s) => s.rows));
  return [
    '## Retention under steady traffic (soak)',
    '',
    `A broker as shipped (retention job every 30 s), one queue with \`completedRetentionSeconds: ${soak.completedRetentionSeconds}\`: ` +
      `4 producers pushing ${soak.targetPerSecond} messages/s in batches of 10 over 8 partitions, one consumer group of 2 ` +
      `consumers popping (batch 100, long poll) and acking, for ${soak.seconds} s. Every 5 s the live rows of \`messages\` ` +
      'are counted; every 30 s `VACUUM (ANALYZE) messages` runs, as autovacuum would (it is off on this machine).',
    '',
    '| second | live rows | dead rows |',
    '| ---: | ---: | ---: |',
    ...soak.samples
      .filter((_sample, index) => index % 4 === 3)
      .map((sample) => `| ${sample.second} | ${sample.rows} | ${sample.deadRows} |`),
    '',
    '| window | pushed/s | push p99 ms | consumed/s | pop+ack p99 ms |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...soak.minutes.map(
      (minute) =>
        `| ${minute.label} | ${minute.pushedPerSecond} | ${minute.pushP99} | ${minute.consumedPerSecond} | ${minute.popAckP99} |`,
    ),
    '',
    `- the row count levels off: at most ${lastHalfMax} in the second half against ${firstHalfMax} in the first (peak ${peak}): ` +
      verdict(lastHalfMax <= firstHalfMax * 1.5),
    `- last minute within noise of the first: consumed ${last.consumedPerSecond}/s against ${first.consumedPerSecond}/s, ` +
      `pop+ack p99 ${last.popAckP99} ms against ${first.popAckP99} ms: ` +
      verdict(last.consumedPerSecond >= 0.8 * first.consumedPerSecond && last.popAckP99 <= 2 * first.popAckP99 + 20),
    `- errors: ${soak.errors}${describeErrors(soak.errorKinds)}: ${verdict(soak.errors === 0)}`,
    `- the job: ${soak.retentionRounds} rounds, ${soak.retentionSeconds.toFixed(1)} s in all, ${soak.deleted} rows deleted; ` +
      `the broker used ${soak.brokerCpuSeconds.toFixed(1)} s of CPU in all over the soak`,
    '',
  ];
}

function log(message: string): void {
  process.stdout.write(`${message}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});

function describeErrors(kinds: Record<string, number>): string {
  const entries = Object.entries(kinds);
  return entries.length === 0 ? '' : ` (${entries.map(([kind, count]) => `${count}× ${kind}`).join(', ')})`;
}
