import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { percentile } from './http';
import { startFlags } from './start-flags';
import { ADMIN_URL, dropDatabase, recreateDatabase } from './database';

/*
 * What a parked long poll costs the broker, and how soon one of many wakes.
 *
 * The broker runs in its own process with `npm start`'s flags plus --expose-gc and a preloaded probe: on SIGUSR2 it
 * collects garbage twice and writes process.memoryUsage() to a file. This process is the client: raw keep-alive
 * sockets, so nothing of the client's own runs in the broker.
 *
 * For each count N: N sockets each complete one GET /health/live and stay open idle (what a connection costs: socket,
 * HTTP parser, Node's buffers), then each sends one long poll on its own partition and the poll parks. The poll's cost
 * is the second step's growth over the first, per poll, so socket and parser memory stay out of it; the first is
 * reported beside it. Then single pushes each wake one of the N parked polls (push answer to poll answer), and one
 * push of one message per partition wakes all N (push sent to each poll's answer). Closing the sockets must give the
 * polls' memory back.
 *
 *   npm run build && npx tsc -p tsconfig.bench.json && node dist-bench/bench/poll-memory.js [N ...]
 *
 * BENCH_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_BROKER_ROOT (default this checkout).
 */

const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..'));
const DATABASE = 'leasehold_bench_poll_memory';
const PORT = Number(process.env.BENCH_PORT ?? 3391);
const QUEUE = 'bench-parked';
const SINGLE_WAKES = 200;
/** BENCH_ALL_WAKE=0: no waking of all N at once (seconds of claims), and no hang-up check after it. */
const SKIP_ALL = process.env.BENCH_ALL_WAKE === '0';
const CONNECT_AT_ONCE = 250;
/** Set while this process hangs up itself. */
let closing = false;

const PROBE = `
const { writeFileSync, renameSync } = require('node:fs');
process.on('SIGUSR2', () => {
  for (let i = 0; i < 3; i += 1) global.gc();
  const out = process.env.LEASEHOLD_BENCH_PROBE_OUT;
  const snapshots = process.env.LEASEHOLD_BENCH_SNAPSHOT_DIR;
  if (snapshots) require('node:v8').writeHeapSnapshot(snapshots + '/' + Date.now() + '.heapsnapshot');
  writeFileSync(out + '.tmp', JSON.stringify(process.memoryUsage()));
  renameSync(out + '.tmp', out);
});
`;

interface Memory {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export interface PollMemoryRow {
  polls: number;
  /** Per idle keep-alive connection: heap + external, and RSS. */
  connectionHeapBytes: number;
  connectionRssBytes: number;
  /** Per parked poll, over its idle connection. */
  pollHeapBytes: number;
  pollRssBytes: number;
  /** Left per poll once the clients hung up (should be ~0). */
  leftHeapBytes: number;
  singleWakeP50: number;
  singleWakeP99: number;
  allWakeP50: number;
  allWakeP99: number;
}

async function main(): Promise<void> {
  const counts = process.argv.slice(2).map(Number).filter(Boolean);
  const rows: PollMemoryRow[] = [];
  for (const count of counts.length > 0 ? counts : [5_000, 10_000]) rows.push(await measure(count));
  console.log(
    '\n| parked polls | heap+external per poll | RSS per poll | per idle connection (heap+external / RSS) ' +
      '| left after hang-up | one of N woken p50 / p99 | all N woken p50 / p99 |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const row of rows) {
    console.log(
      `| ${row.polls} | ${kb(row.pollHeapBytes)} | ${kb(row.pollRssBytes)} | ` +
        `${kb(row.connectionHeapBytes)} / ${kb(row.connectionRssBytes)} | ${kb(row.leftHeapBytes)} | ` +
        `${row.singleWakeP50.toFixed(1)} / ${row.singleWakeP99.toFixed(1)} ms | ` +
        `${row.allWakeP50.toFixed(0)} / ${row.allWakeP99.toFixed(0)} ms |`,
    );
  }
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(2)} KB`;
}

/** N idle connections, then a poll parked on each: what a poll costs over its connection. Used by bench:scale too. */
export async function measure(count: number, allWake = !SKIP_ALL): Promise<PollMemoryRow> {
  closing = false;
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-poll-memory-'));
  const probe = join(dir, 'probe.js');
  const out = join(dir, 'memory.json');
  writeFileSync(probe, PROBE);
  const url = await recreateDatabase(ADMIN_URL, DATABASE);
  const limit = String(count * 2 + 100);
  const broker = spawn(
    process.execPath,
    [...startFlags(ROOT), '--expose-gc', '--require', probe, join(ROOT, 'dist', 'src', 'main.js')],
    {
      env: {
        ...process.env,
        PORT: String(PORT),
        HOST: '127.0.0.1',
        DATABASE_URL: url,
        JWT_ENABLED: 'false',
        NODE_ENV: 'production',
        LOG_REQUESTS: 'false',
        HTTP_MAX_CONNECTIONS: limit,
        HTTP_TENANT_MAX_CONNECTIONS: limit,
        HTTP_TENANT_MAX_REQUESTS: limit,
        POP_MAX_WAITING_PER_TENANT: limit,
        HTTP_KEEP_ALIVE_TIMEOUT_MS: '600000',
        RATE_LIMIT_CONSUME: '0',
        RATE_LIMIT_PRODUCE: '0',
        LEASEHOLD_BENCH_PROBE_OUT: out,
        // Set to a folder, the broker writes a heap snapshot there at each measurement (bench/heap-diff.ts compares two).
        LEASEHOLD_BENCH_SNAPSHOT_DIR: process.env.BENCH_SNAPSHOT_DIR ?? '',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  // Warnings and errors of the broker's log, so that a poll answered otherwise than by a wakeup says why.
  let unread = '';
  broker.stdout.on('data', (chunk: Buffer) => {
    const lines = (unread + chunk.toString()).split('\n');
    unread = lines.pop() ?? '';
    for (const line of lines) if (/"level":(4|5)0/.test(line)) console.error(line.slice(0, 500));
  });
  const sockets: Socket[] = [];
  try {
    const base = `http://127.0.0.1:${PORT}`;
    await untilReady(base);
    const memory = async (): Promise<Memory> => {
      rmSync(out, { force: true });
      broker.kill('SIGUSR2');
      while (!existsSync(out)) await sleep(20);
      return JSON.parse(readFileSync(out, 'utf8')) as Memory;
    };
    const settle = () => untilIdle(broker.pid!);
    // The queue and its partitions exist, so a poll's first look is the claim every later one is.
    for (let start = 0; start < count; start += 1_000) {
      const items = [];
      for (let index = start; index < Math.min(count, start + 1_000); index += 1) {
        items.push({ queue: QUEUE, partition: `p${index}`, payload: { index } });
      }
      await post(base, '/api/v1/push', { items });
    }
    while ((await get(base, `/api/v1/pop/queue/${QUEUE}?batch=10000&partitions=1000&autoAck=true`)) === 200);
    await settle();
    const before = await memory();
    console.error(`${count}: broker ready, measuring connections`);

    const answeredBy: Array<(at: number) => void> = [];
    for (let start = 0; start < count; start += CONNECT_AT_ONCE) {
      const batch = [];
      for (let index = start; index < Math.min(count, start + CONNECT_AT_ONCE); index += 1) {
        batch.push(open(index, sockets, answeredBy));
      }
      await Promise.all(batch);
    }
    await Promise.all(sockets.map((socket, index) => request(socket, index, answeredBy, 'GET /health/live')));
    await settle();
    const idle = await memory();
    console.error(`${count}: ${count} idle connections, parking polls`);

    const woken = new Array<Promise<number>>(count);
    let early = 0;
    for (let index = 0; index < count; index += 1) {
      woken[index] = request(sockets[index], index, answeredBy, pollLine(index));
    }
    for (const poll of woken)
      void poll.then(
        () => (early += 1),
        () => undefined,
      );
    await untilParked(base, () => count - early);
    await settle();
    const parked = await memory();
    // Answered before any push (a database timeout on a busy machine): counted out of the cost per poll.
    const parkedCount = count - early;
    if (early > 0) console.error(`${count}: ${early} polls answered before any push`);
    const perPoll = (parked.heapUsed + parked.external - idle.heapUsed - idle.external) / parkedCount;
    console.error(
      `${count}: ${(perPoll / 1024).toFixed(2)} KB heap per parked poll; ${JSON.stringify({ idle, parked })}`,
    );
    console.error(`${count}: parked, waking`);

    // Those answered early park again.
    for (let index = 0; index < count; index += 1) {
      const done = await Promise.race([woken[index].then(() => true), Promise.resolve(false)]);
      if (!done) continue;
      // An error answer may have closed its connection.
      if (sockets[index].destroyed) await open(index, sockets, answeredBy);
      woken[index] = request(sockets[index], index, answeredBy, pollLine(index));
    }
    await untilParked(base, () => count);
    await settle();

    // One of N: a push to one partition, timed from its answer to the poll's answer.
    const single: number[] = [];
    const order = shuffled(count);
    for (const index of order.slice(0, Math.min(SINGLE_WAKES, count))) {
      await post(base, '/api/v1/push', { items: [{ queue: QUEUE, partition: `p${index}`, payload: { index } }] });
      const pushedAt = performance.now();
      single.push((await woken[index]) - pushedAt);
      woken[index] = request(sockets[index], index, answeredBy, pollLine(index));
    }
    await untilParked(base, () => count);
    await settle();

    // All N: one message for each partition, in pushes of 1,000, one after the other (a push the database timed out
    // while the woken polls claim is sent again).
    const sentAt = performance.now();
    for (let start = 0; start < (allWake ? count : 0); start += 1_000) {
      const items = [];
      for (let index = start; index < Math.min(count, start + 1_000); index += 1) {
        items.push({ queue: QUEUE, partition: `p${index}`, payload: { index }, transactionId: `all-${index}` });
      }
      for (let attempt = 0; ; attempt += 1) {
        const pushed = await post(base, '/api/v1/push', { items }).then(
          () => true,
          () => false,
        );
        if (pushed) break;
        if (attempt === 5) throw new Error('a push failed six times');
      }
    }
    const all = !allWake ? [] : (await Promise.all(woken)).map((at) => at - sentAt);

    // Park them again, then hang up: what they held must go.
    if (allWake) {
      for (let index = 0; index < count; index += 1) {
        void request(sockets[index], index, answeredBy, pollLine(index)).catch(() => undefined);
      }
      await untilParked(base, () => count);
      await settle();
    }
    closing = true;
    for (const socket of sockets.splice(0)) socket.destroy();
    await untilParked(base, () => 0);
    await settle();
    const gone = await memory();

    const row: PollMemoryRow = {
      polls: count,
      connectionHeapBytes: (idle.heapUsed + idle.external - before.heapUsed - before.external) / count,
      connectionRssBytes: (idle.rss - before.rss) / count,
      pollHeapBytes: (parked.heapUsed + parked.external - idle.heapUsed - idle.external) / parkedCount,
      pollRssBytes: (parked.rss - idle.rss) / parkedCount,
      leftHeapBytes: (gone.heapUsed + gone.external - before.heapUsed - before.external) / count,
      singleWakeP50: percentile(single, 0.5),
      singleWakeP99: percentile(single, 0.99),
      allWakeP50: percentile(all, 0.5),
      allWakeP99: percentile(all, 0.99),
    };
    console.log(JSON.stringify({ row, before, idle, parked, gone }));
    return row;
  } finally {
    for (const socket of sockets) socket.destroy();
    if (broker.exitCode === null && broker.signalCode === null) {
      const exited = new Promise((done) => broker.once('exit', done));
      broker.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
    await dropDatabase(ADMIN_URL, DATABASE);
  }
}

function pollLine(index: number): string {
  return `GET /api/v1/pop/queue/${QUEUE}/partition/p${index}?wait=true&timeout=600000&autoAck=true`;
}

function open(index: number, sockets: Socket[], answeredBy: Array<(at: number) => void>): Promise<void> {
  return new Promise((done, fail) => {
    const socket = connect(PORT, '127.0.0.1', () => done());
    socket.setNoDelay(true);
    socket.once('error', fail);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      if (!closing) console.error(`connection ${index} closed by the broker`);
    });
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      // Each answer carries Content-Length or is a 204; one answer is in flight per socket.
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = /content-length: (\d+)/i.exec(text.slice(0, end));
      if (length && text.length < end + 4 + Number(length[1])) return;
      text = '';
      answeredBy[index]?.(performance.now());
    });
    sockets[index] = socket;
  });
}

function request(
  socket: Socket,
  index: number,
  answeredBy: Array<(at: number) => void>,
  line: string,
): Promise<number> {
  const answer = new Promise<number>((done, fail) => {
    answeredBy[index] = done;
    socket.once('close', () => fail(new Error(`connection ${index} closed`)));
    socket.write(`${line} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`);
  });
  // Awaited later; a connection closed meanwhile is reported where it is awaited, not as an unhandled rejection.
  answer.catch(() => undefined);
  return answer;
}

/** A 5xx (a database timeout on a busy machine) is sent again, a few times. */
async function post(base: string, path: string, body: unknown): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await response.text();
    if (response.status < 300) return;
    if (response.status < 500 || attempt === 4) throw new Error(`${path} answered ${response.status}`);
  }
}

async function get(base: string, path: string): Promise<number> {
  const response = await fetch(`${base}${path}`);
  await response.text();
  return response.status;
}

async function untilReady(base: string): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt += 1) {
    if ((await get(base, '/health/ready').catch(() => 0)) === 200) return;
    await sleep(100);
  }
  throw new Error('the broker did not become ready');
}

async function untilParked(base: string, count: () => number): Promise<void> {
  const since = performance.now();
  let said = since;
  for (;;) {
    const text = await (await fetch(`${base}/metrics`)).text();
    const parked = Number(/^leasehold_parked_polls (\d+)/m.exec(text)?.[1] ?? -1);
    if (parked === count()) return;
    // A poll that never parks (or one too many) would hold the run for ever: say so, and give up after a minute.
    if (performance.now() - said > 10_000) {
      said = performance.now();
      const line = `${((said - since) / 1000).toFixed(0)} s: ${parked} polls in progress, waiting for ${count()}`;
      if (said - since > 60_000) throw new Error(line);
      console.error(line);
    }
    await sleep(200);
  }
}

/** Until the broker used under 2% of a core for a second. */
async function untilIdle(pid: number): Promise<void> {
  const ticks = () => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  let last = ticks();
  for (;;) {
    await sleep(1_000);
    const now = ticks();
    if (now - last <= 2) return;
    last = now;
  }
}

function shuffled(count: number): number[] {
  const order = Array.from({ length: count }, (_, index) => index);
  for (let index = count - 1; index > 0; index -= 1) {
    const other = Math.floor(Math.random() * (index + 1));
    [order[index], order[other]] = [order[other], order[index]];
  }
  return order;
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
