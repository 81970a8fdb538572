import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { percentile } from '../http';
import { startFlags } from '../start-flags';
import { ADMIN_URL, databaseUrlOf, dropDatabase as dropBenchDatabase, recreateDatabase } from '../database';

/** What every scenario of `npm run bench:scale` shares: settings, databases, broker processes, timing, results. */

export { ADMIN_URL };
/** Prefix of the databases the run creates (and drops at its end). */
export const DATABASE_PREFIX = process.env.BENCH_DATABASE ?? 'leasehold_bench_scale';
export const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..', '..'));
export const SIZES = (process.env.BENCH_SCALE_SIZES ?? '100,10000,100000,1000000')
  .split(',')
  .map((size) => Number(size.trim()))
  .filter((size) => Number.isInteger(size) && size > 0)
  .sort((a, b) => a - b);
export const ROUNDS = Number(process.env.BENCH_SCALE_ROUNDS ?? 3);
export const BASE_PORT = Number(process.env.BENCH_PORT ?? 6940);
export const LARGEST = SIZES[SIZES.length - 1];
export const SMALLEST = SIZES[0];

export const JWT_SECRET = 'bench-scale-secret-of-at-least-32-bytes';
export const METRICS_TOKEN = 'bench-scale-metrics-token';
export const TENANT_HEADER = 'x-bench-tenant';

export interface Outcome {
  /** The target, in its words. */
  target: string;
  measured: string;
  /** Undefined: nothing to judge (the measurement failed or the figure is informative). */
  met: boolean | undefined;
}

export interface Curve {
  /** File name under bench/charts, without .svg. */
  file: string;
  title: string;
  xName: string;
  yName: string;
  /** Sizes on a log axis. */
  logX: boolean;
  series: Array<{ name: string; points: Array<[number, number]> }>;
  /** A horizontal line: the target, when it is a fixed value on this axis. */
  limit?: { value: number; name: string };
}

export interface ScenarioResult {
  outcomes: Outcome[];
  curves: Curve[];
  /** Free lines for the report: how it was measured, what was seen. */
  notes: string[];
}

export function dbUrl(database: string): string {
  return databaseUrlOf(ADMIN_URL, database);
}

export async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const createdDatabases = new Set<string>();
/** Set by cleanUp: a scenario still running then creates nothing more that would outlive the run. */
let stopping = false;

export async function createDatabase(name: string): Promise<string> {
  if (stopping) throw new Error('the run is stopping');
  const url = await recreateDatabase(ADMIN_URL, name);
  createdDatabases.add(name);
  return url;
}

/** BENCH_SCALE_KEEP=1: the databases stay for a look afterwards (drop them yourself: `leasehold_bench_scale_*`). */
export const KEEP_DATABASES = process.env.BENCH_SCALE_KEEP === '1';

export async function dropDatabase(name: string): Promise<void> {
  if (KEEP_DATABASES) return;
  await dropBenchDatabase(ADMIN_URL, name);
  createdDatabases.delete(name);
}

export interface Broker {
  base: string;
  pid: number;
  process: ChildProcess;
  /** Resident memory of the process now, in bytes (from /proc). */
  rssBytes(): number;
  stop(): Promise<void>;
}

const running = new Set<Broker>();
// However the run ends, no broker of its outlives it.
process.on('exit', () => {
  for (const broker of running) broker.process.kill('SIGKILL');
});

/** A broker process of ROOT with `npm start`'s V8 flags (plus `nodeFlags`), ready when it returns. */
export async function startBroker(options: {
  databaseUrl: string;
  port: number;
  env?: Record<string, string>;
  nodeFlags?: string[];
}): Promise<Broker> {
  const { databaseUrl, port, env = {}, nodeFlags = [] } = options;
  if (stopping) throw new Error('the run is stopping');
  const merged: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    JWT_ENABLED: 'false',
    TENANT_HEADER,
    NODE_ENV: 'production',
    LOG_REQUESTS: 'false',
    LOG_LEVEL: 'warn',
    METRICS_TOKEN,
    RETENTION_INTERVAL_MS: '0',
    TENANT_MAX_PARTITIONS: '0',
    ...env,
  };
  // An empty value: the setting is not given at all.
  for (const [key, value] of Object.entries(merged)) if (value === '') delete merged[key];
  const child = spawn(process.execPath, [...startFlags(ROOT), ...nodeFlags, join(ROOT, 'dist', 'src', 'main.js')], {
    env: merged,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stdout?.resume();
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const base = `http://127.0.0.1:${port}`;
  const broker: Broker = {
    base,
    pid: child.pid ?? 0,
    process: child,
    rssBytes: () => {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
    },
    stop: async () => {
      running.delete(broker);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
  running.add(broker);
  for (let attempt = 0; ; attempt += 1) {
    if (child.exitCode !== null) throw new Error(`broker on ${port} exited with ${child.exitCode}: ${stderr}`);
    const ready = await fetch(`${base}/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return broker;
    if (attempt > 600) {
      await broker.stop();
      throw new Error(`broker on ${port} not ready within two minutes: ${stderr}`);
    }
    await sleep(200);
  }
}

/** Every broker still running and every database still there, gone: the end of a run, failed or not. */
export async function cleanUp(): Promise<void> {
  stopping = true;
  await Promise.allSettled([...running].map((broker) => broker.stop()));
  for (const name of [...createdDatabases]) await dropDatabase(name).catch(() => undefined);
}

export interface Timed<T = unknown> {
  status: number;
  body: T;
  ms: number;
  at: number;
}

/** One HTTP call; `who` is a tenant id (sent in TENANT_HEADER) or a full `Bearer ...` authorization. */
export async function send<T = unknown>(
  base: string,
  who: string | undefined,
  method: string,
  path: string,
  body?: unknown,
): Promise<Timed<T>> {
  const headers: Record<string, string> = {};
  if (who?.startsWith('Bearer ')) headers.authorization = who;
  else if (who) headers[TENANT_HEADER] = who;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const started = performance.now();
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const at = performance.now();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON (/metrics): keep the text.
  }
  return { status: response.status, body: parsed as T, ms: at - started, at };
}

export async function expectStatus<T>(answer: Promise<Timed<T>>, ...statuses: number[]): Promise<Timed<T>> {
  const got = await answer;
  if (!statuses.includes(got.status))
    throw new Error(`expected ${statuses.join('/')}, got ${got.status}: ${JSON.stringify(got.body)}`);
  return got;
}

export interface Popped {
  leaseId: string;
  partitionId: string;
  messages: Array<{ transactionId: string; partitionId: string }>;
}

export async function ackAll(base: string, who: string | undefined, popped: Popped): Promise<Timed> {
  return send(base, who, 'POST', '/api/v1/ack/batch', {
    acknowledgments: popped.messages.map((message) => ({
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      leaseId: popped.leaseId,
      status: 'completed',
    })),
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

export const p50 = (values: number[]): number => percentile(values, 0.5);
export const p99 = (values: number[]): number => percentile(values, 0.99);

/** Milliseconds with one decimal below 10, whole above. */
export function ms(value: number): string {
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

export function count(value: number): string {
  return value >= 1_000_000 && value % 100_000 === 0
    ? `${value / 1_000_000}M`
    : value >= 1000 && value % 1000 === 0
      ? `${value / 1000}k`
      : String(value);
}

/** Sizes in the order of round `round`: rotated, so no size always runs first or last. */
export function rotated<T>(items: T[], round: number): T[] {
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** The database's clock, in epoch milliseconds. */
export async function dbNow(client: Client): Promise<number> {
  const { rows } = await client.query<{ now: string }>(
    'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now',
  );
  return Number(rows[0].now);
}

export function record(map: Map<number, number[]>, key: number, value: number): void {
  const values = map.get(key);
  if (values) values.push(value);
  else map.set(key, [value]);
}

/** The value of one series of a Prometheus text exposition, or undefined when it is absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== '{' && line[name.length] !== ' ')) continue;
    if (!Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`))) continue;
    total = (total ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

export async function scrape(base: string): Promise<string> {
  const answer = await send<string>(base, `Bearer ${METRICS_TOKEN}`, 'GET', '/metrics');
  return typeof answer.body === 'string' ? answer.body : '';
}
