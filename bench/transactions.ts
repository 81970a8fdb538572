import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { percentile } from './http';
import { startFlags } from './start-flags';
import { cpuFrom } from './usage';
import { ADMIN_URL, dropDatabase, recreateDatabase } from './database';

/*
 * `node dist-bench/bench/transactions.js <other checkout, built>`: what one
 * large transaction costs against a push of as many items, on two builds side
 * by side (the other checkout's and this one's), each started as `npm start`
 * starts it (NODE_ENV=production), each on a fresh database of its own that is
 * dropped at the end, rate limits off. Rounds alternate between the builds:
 *
 * - a push of 10,000 items over 50 partitions;
 * - a transaction of 10,000 operations alternating a push of one item (over
 *   the same 50 partitions) and an ack of a message popped under one lease,
 *   the lease required;
 * - a transaction of 9,999 such acks and one push of 10,000 items: a pipeline
 *   stage at a pop's largest batch, within the older cap of 10,000 operations.
 *
 * Each payload is about 60 bytes, so the alternating transaction's body is
 * about 1 MB. Only the request is timed; the messages it acks are pushed and
 * popped before; each build first runs each once untimed. Then, once per
 * build, eight tenants send such a push at once, then such an alternating
 * transaction, while another tenant pushes one message at a time: that
 * tenant's p50 and p99.
 * Broker CPU only: PostgreSQL's processes on a shared machine serve others too.
 * Prints Markdown tables; not part of CI.
 */

const ROOT = join(__dirname, '..', '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const OPERATIONS = 10_000;
const PARTITIONS = 50;
const TENANT_HEADER = 'x-bench-tenant';
const PAYLOAD = 'x'.repeat(50);

type Workload = 'push' | 'alternating' | 'stage';
/** What eight tenants send at once while another pushes one message at a time. */
type Burst = 'push' | 'alternating';

interface Victim {
  p50: number;
  p99: number;
  max: number;
  requests: number;
  /** Each of the eight: its outcome and time. */
  outcomes: string[];
}
const WORKLOADS: Workload[] = ['push', 'alternating', 'stage'];
const NAMES: Record<Workload, string> = {
  push: 'push of 10,000 items',
  alternating: 'transaction: 5,000 pushes of one item alternating with 5,000 acks',
  stage: 'transaction: 9,999 acks, then one push of 10,000 items',
};

interface Timing {
  ms: number;
  status: number;
  /** The transaction's reason when it did not commit, or the error body of a failure. */
  outcome: string;
  brokerCpuMs: number;
}

interface Side {
  name: string;
  root: string;
  port: number;
  database: string;
  process?: ChildProcess;
  timings: Record<Workload, Timing[]>;
  victims: Partial<Record<Burst, Victim>>;
}

async function main(): Promise<void> {
  const other = process.argv[2];
  if (!other) throw new Error('usage: node dist-bench/bench/transactions.js <path of the other checkout, built>');
  const suffix = randomUUID().slice(0, 8);
  const sides: Side[] = [
    { name: 'other', root: other, port: 6730, database: `leasehold_tx_other_${suffix}`, timings: empty(), victims: {} },
    { name: 'this', root: ROOT, port: 6731, database: `leasehold_tx_this_${suffix}`, timings: empty(), victims: {} },
  ];
  try {
    for (const side of sides) {
      await startBroker(side);
      // Untimed: the first of each on a new broker also pays for its connections' prepared statements.
      for (const workload of WORKLOADS) await timed(side, workload, 'warm-up');
    }
    for (let index = 0; index < ROUNDS; index += 1) {
      for (const workload of WORKLOADS) {
        for (const side of index % 2 === 0 ? sides : [...sides].reverse()) {
          side.timings[workload].push(await timed(side, workload, `r${index}`));
        }
      }
    }
    for (const burst of ['push', 'alternating'] as Burst[]) {
      for (const side of sides) side.victims[burst] = await eightAtOnce(side, burst);
    }
  } finally {
    for (const side of sides) side.process?.kill('SIGTERM');
    await Promise.all(sides.map((side) => exited(side.process)));
    for (const side of sides) await dropDatabase(ADMIN_URL, side.database);
  }
  print(sides);
}

function empty(): Record<Workload, Timing[]> {
  return { push: [], alternating: [], stage: [] };
}

async function startBroker(side: Side): Promise<void> {
  const databaseUrl = await recreateDatabase(ADMIN_URL, side.database);
  side.process = spawn(process.execPath, [...startFlags(side.root), join(side.root, 'dist', 'src', 'main.js')], {
    env: {
      ...process.env,
      NODE_ENV: 'production',
      PORT: String(side.port),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      TENANT_HEADER,
      RATE_LIMIT_PRODUCE: '0',
      RATE_LIMIT_CONSUME: '0',
      LOG_REQUESTS: 'false',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  side.process.stdout?.resume();
  await untilReady(base(side));
}

function base(side: Side): string {
  return `http://127.0.0.1:${side.port}`;
}

/** A JSON call as `tenant`. */
async function send<T>(side: Side, tenant: string, method: string, path: string, body?: unknown) {
  const started = performance.now();
  const response = await fetch(`${base(side)}${path}`, {
    method,
    headers: { [TENANT_HEADER]: tenant, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T, ms: performance.now() - started };
}

interface Popped {
  leaseId: string;
  messages: Array<{ transactionId: string; partitionId: string; leaseEpoch: number }>;
}

/** `count` messages pushed to a queue of one partition and popped under one lease, untimed. */
async function leased(side: Side, tenant: string, queue: string, count: number): Promise<Popped> {
  for (let offset = 0; offset < count; offset += 5_000) {
    const items = Array.from({ length: Math.min(5_000, count - offset) }, (_, n) => ({
      queue,
      transactionId: `in-${offset + n}`,
      payload: { n: offset + n, body: PAYLOAD },
    }));
    const pushed = await send(side, tenant, 'POST', '/api/v1/push', { items });
    if (pushed.status !== 201) throw new Error(`${side.name}: input push answered ${pushed.status}`);
  }
  const popped = await send<Popped>(side, tenant, 'GET', `/api/v1/pop/queue/${queue}?batch=${count}&leaseSeconds=600`);
  if (popped.status !== 200 || popped.body.messages.length !== count) {
    throw new Error(`${side.name}: the pop answered ${popped.status}`);
  }
  return popped.body;
}

const item = (queue: string, n: number) => ({ queue, partition: `p${n % PARTITIONS}`, payload: { n, body: PAYLOAD } });

const ackOf = (popped: Popped, message: Popped['messages'][number]) => ({
  type: 'ack',
  transactionId: message.transactionId,
  partitionId: message.partitionId,
  leaseId: popped.leaseId,
  leaseEpoch: message.leaseEpoch,
});

async function alternatingBody(side: Side, tenant: string, queue: string): Promise<unknown> {
  const popped = await leased(side, tenant, `${queue}-in`, OPERATIONS / 2);
  return {
    operations: popped.messages.flatMap((message, n) => [
      { type: 'push', items: [item(`${queue}-out`, n)] },
      ackOf(popped, message),
    ]),
    requiredLeases: [popped.leaseId],
  };
}

async function timed(side: Side, workload: Workload, round: string): Promise<Timing> {
  const tenant = randomUUID();
  const queue = `${workload}-${round}`;
  let path = '/api/v1/transaction';
  let body: unknown;
  if (workload === 'push') {
    path = '/api/v1/push';
    body = { items: Array.from({ length: OPERATIONS }, (_, n) => item(queue, n)) };
  } else if (workload === 'alternating') {
    body = await alternatingBody(side, tenant, queue);
  } else {
    const popped = await leased(side, tenant, `${queue}-in`, OPERATIONS - 1);
    body = {
      operations: [
        ...popped.messages.map((message) => ackOf(popped, message)),
        { type: 'push', items: Array.from({ length: OPERATIONS }, (_, n) => item(`${queue}-out`, n)) },
      ],
      requiredLeases: [popped.leaseId],
    };
  }
  const used = cpuFrom(side.process!);
  const answer = await send<{ success?: boolean; reason?: string; error?: string }>(side, tenant, 'POST', path, body);
  const cpu = used();
  const committed = answer.status === 201 || (answer.status === 200 && answer.body.success === true);
  return {
    ms: Math.round(answer.ms),
    status: answer.status,
    outcome: committed ? 'ok' : `${answer.status} ${answer.body.reason ?? answer.body.error ?? ''}`,
    brokerCpuMs: Math.round(cpu.broker * 1000),
  };
}

/** Eight tenants' pushes of 10,000 items or alternating transactions at once; meanwhile another pushes one message at a time. */
async function eightAtOnce(side: Side, burst: Burst): Promise<Victim> {
  const tenants = Array.from({ length: 8 }, () => randomUUID());
  const bodies: unknown[] = [];
  for (const tenant of tenants) {
    bodies.push(
      burst === 'push'
        ? { items: Array.from({ length: OPERATIONS }, (_, n) => item('eight', n)) }
        : await alternatingBody(side, tenant, 'eight'),
    );
  }
  const victim = randomUUID();
  const latencies: number[] = [];
  let done = false;
  const victimLoop = (async () => {
    // Its partition exists before the measured pushes.
    await send(side, victim, 'POST', '/api/v1/push', { items: [{ queue: 'victim', payload: 0 }] });
    while (!done) {
      const answer = await send(side, victim, 'POST', '/api/v1/push', { items: [{ queue: 'victim', payload: 1 }] });
      latencies.push(answer.status === 201 ? answer.ms : Number.POSITIVE_INFINITY);
    }
  })();
  const answers = await Promise.all(
    tenants.map((tenant, n) =>
      send<{ success?: boolean; reason?: string; error?: string }>(
        side,
        tenant,
        'POST',
        burst === 'push' ? '/api/v1/push' : '/api/v1/transaction',
        bodies[n],
      ),
    ),
  );
  done = true;
  await victimLoop;
  return {
    p50: Math.round(percentile(latencies, 0.5)),
    p99: Math.round(percentile(latencies, 0.99)),
    max: Math.round(Math.max(...latencies)),
    requests: latencies.length,
    outcomes: answers.map((answer) =>
      answer.status === 201 || (answer.status === 200 && answer.body.success)
        ? `ok ${Math.round(answer.ms)} ms`
        : `${answer.status} ${answer.body.reason ?? answer.body.error ?? ''} ${Math.round(answer.ms)} ms`,
    ),
  };
}

function print(sides: Side[]): void {
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const label = (side: Side) => (side.name === 'this' ? 'this checkout' : side.root);
  console.log(`| build | request | ms (median of ${ROUNDS}) | rounds, ms (outcome) | broker CPU ms |`);
  console.log('| --- | --- | ---: | --- | ---: |');
  for (const workload of WORKLOADS) {
    for (const side of sides) {
      const timings = side.timings[workload];
      console.log(
        `| ${label(side)} | ${NAMES[workload]} | ${median(timings.map((t) => t.ms))} | ` +
          `${timings.map((t) => `${t.ms} (${t.outcome})`).join(', ')} | ${median(timings.map((t) => t.brokerCpuMs))} |`,
      );
    }
  }
  console.log('');
  console.log(
    '| build | eight tenants at once | another tenant’s one-message pushes meanwhile | p50 ms | p99 ms | max ms | the eight |',
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: | --- |');
  for (const burst of ['push', 'alternating'] as Burst[]) {
    for (const side of sides) {
      const victim = side.victims[burst]!;
      console.log(
        `| ${label(side)} | ${NAMES[burst]} | ${victim.requests} | ${victim.p50} | ${victim.p99} | ${victim.max} | ` +
          `${victim.outcomes.join(', ')} |`,
      );
    }
  }
}

function exited(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function untilReady(url: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt += 1) {
    const ready = await fetch(`${url}/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${url} did not become ready`);
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
