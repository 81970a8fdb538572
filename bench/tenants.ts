import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { connect, Socket } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { sign } from 'jsonwebtoken';
import { Client } from 'pg';

/*
 * Tenant isolation: tenant B renews one one-row lease in a loop (in a
 * process of its own) while tenant A (or an anonymous caller) misbehaves,
 * one way per scenario, against a broker with auth on. What is judged is
 * B's renewal latency and errors.
 */

export interface IsolationRow {
  scenario: string;
  victimRenewals: number;
  victimP50: number;
  victimP99: number;
  victimMax: number;
  victimErrors: number;
  attacker: string;
  brokerRssMb?: number;
}

export interface IsolationBroker {
  base: string;
  secret: string;
  /** The broker's METRICS_TOKEN, for the scraper of the queue-flood scenario. */
  metricsToken: string;
  /** The broker's resident memory now, in MB. */
  rssMb: () => number;
  /** The broker's database, for the scenario in which a transaction of tenant A holds its rows. */
  databaseUrl: string;
}

interface Timed {
  status: number;
  ms: number;
  body?: unknown;
}

const TENANT_A = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a01';
const TENANT_B = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a02';

export async function measureIsolation(broker: IsolationBroker, seconds: number): Promise<IsolationRow[]> {
  const token = (tenant: string, role: string) =>
    `Bearer ${sign({ role, tenant }, broker.secret, { algorithm: 'HS256', expiresIn: '1h' })}`;
  const a = token(TENANT_A, 'read-write');
  const aWriter = token(TENANT_A, 'write-only');
  const b = token(TENANT_B, 'read-write');
  const call = async (
    method: string,
    path: string,
    auth: string | undefined,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Timed> => {
    const started = performance.now();
    try {
      const response = await fetch(`${broker.base}${path}`, {
        method,
        signal,
        headers: {
          ...(auth ? { authorization: auth } : {}),
          ...(body === undefined || Buffer.isBuffer(body) ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, ms: performance.now() - started, body: text ? safeJson(text) : undefined };
    } catch {
      return { status: 0, ms: performance.now() - started };
    }
  };

  // Tenant B's lease: one message, one partition.
  await expect201(call('POST', '/api/v1/push', b, { items: [{ queue: 'victim', payload: { n: 1 } }] }));
  const victimLease = ((await call('GET', '/api/v1/pop/queue/victim?leaseSeconds=3600', b)).body as { leaseId: string })
    .leaseId;
  // Tenant A's 20 leases of 500 partitions each.
  await expect201(
    call('POST', '/api/v1/push', a, {
      items: Array.from({ length: 10_000 }, (_, index) => ({ queue: 'wide', partition: `w${index}`, payload: index })),
    }),
  );
  const wideLeases: string[] = [];
  for (let lease = 0; lease < 20; lease += 1) {
    const popped = await call('GET', '/api/v1/pop/queue/wide?partitions=500&batch=500&leaseSeconds=3600', a);
    wideLeases.push((popped.body as { leaseId: string }).leaseId);
  }
  // Tenant A's twenty messages of about 900 KB.
  for (let request = 0; request < 4; request += 1) {
    await expect201(
      call('POST', '/api/v1/push', a, {
        items: Array.from({ length: 5 }, (_, index) => ({
          queue: 'large',
          payload: { index, filler: 'x'.repeat(900 * 1024) },
        })),
      }),
    );
  }
  await call('POST', '/api/v1/configure', a, { queue: 'polled' });
  const bomb = gzipBomb();
  // Tenant A's one lease that it renews from 64 connections, and 16 MB of {"seconds":[{},{},...]}.
  await expect201(call('POST', '/api/v1/push', a, { items: [{ queue: 'hot', payload: 1 }] }));
  const hotLease = ((await call('GET', '/api/v1/pop/queue/hot?leaseSeconds=3600', a)).body as { leaseId: string })
    .leaseId;
  // And a second one-row lease, so that its renewals can fill both renewal slots.
  await expect201(call('POST', '/api/v1/push', a, { items: [{ queue: 'warm', payload: 1 }] }));
  const warmLease = ((await call('GET', '/api/v1/pop/queue/warm?leaseSeconds=3600', a)).body as { leaseId: string })
    .leaseId;
  const secondsFlood = Buffer.from(`{"seconds":[${'{},'.repeat((16 * 1024 * 1024) / 3 - 10)}{}]}`);
  const host = new URL(broker.base);
  let queueNumber = 0;

  const scenarios: Array<[string, (running: () => boolean) => Array<Promise<string>>]> = [
    ['quiet: nobody else', () => []],
    [
      '4 anonymous pushes at a time of a 16 KB gzip body inflating to 16 MiB',
      (running) =>
        loops(4, running, async () => {
          const answer = await call('POST', '/api/v1/push', undefined, bomb, {
            'content-type': 'application/json',
            'content-encoding': 'gzip',
          });
          return String(answer.status);
        }),
    ],
    [
      'tenant A (write-only) pushing the same body, 2 at a time',
      (running) =>
        loops(2, running, async () => {
          const answer = await call('POST', '/api/v1/push', aWriter, bomb, {
            'content-type': 'application/json',
            'content-encoding': 'gzip',
          });
          return String(answer.status);
        }),
    ],
    [
      'tenant A popping twenty ~900 KB messages at once, 2 at a time',
      (running) =>
        loops(2, running, async () =>
          String((await call('GET', '/api/v1/pop/queue/large?batch=20&leaseSeconds=1', a)).status),
        ),
    ],
    [
      'tenant A with 2000 long polls parked and 5 messages pushed every 500 ms',
      (running) => [
        ...loops(2000, running, async () => {
          const answer = await call('GET', '/api/v1/pop/queue/polled?wait=true&timeout=5000&batch=1', a);
          if (answer.status === 429) await sleep(1_000);
          return String(answer.status);
        }),
        ...loops(1, running, async () => {
          const items = Array.from({ length: 5 }, (_, index) => ({
            queue: 'polled',
            partition: `q${index}`,
            payload: index,
          }));
          const answer = await call('POST', '/api/v1/push', a, { items });
          await sleep(500);
          return String(answer.status);
        }),
      ],
    ],
    [
      'tenant A extending with 16 MB bodies of {"seconds":[{},{},...]}, 3 at a time',
      (running) =>
        loops(3, running, async () => {
          const answer = await call('POST', `/api/v1/lease/${hotLease}/extend`, a, secondsFlood, {
            'content-type': 'application/json',
          });
          return String(answer.status);
        }),
    ],
    [
      '64 anonymous connections polling GET /health/ready',
      (running) => loops(64, running, async () => String((await call('GET', '/health/ready', undefined)).status)),
    ],
    [
      'tenant A pushing to a new queue name each time, 8 at a time, and /metrics scraped every second',
      (running) => [
        ...loops(8, running, async () => {
          const answer = await call('POST', '/api/v1/push', aWriter, {
            items: [{ queue: `flood-${(queueNumber += 1)}`, payload: 1 }],
          });
          return String(answer.status);
        }),
        ...loops(1, running, async () => {
          const answer = await call('GET', '/metrics', `Bearer ${broker.metricsToken}`);
          await sleep(1_000);
          return `scrape ${answer.status}`;
        }),
      ],
    ],
    [
      '4300 anonymous sockets sending headers slowly, reconnecting when cut',
      (running) => slowHeaderFlood(host.hostname, Number(host.port), 4_300, running),
    ],
    [
      '8 anonymous sockets each pipelining 10,000 GET /health at once, reconnecting when cut',
      (running) => pipelineFlood(host.hostname, Number(host.port), 8, 10_000, running),
    ],
    [
      'tenant A renewing one lease from 64 connections, ignoring the hints',
      (running) =>
        loops(64, running, async () => {
          const answer = await call('POST', `/api/v1/lease/${hotLease}/extend`, a, { seconds: 3600 });
          return String(answer.status);
        }),
    ],
    [
      "a transaction holding all of tenant A's cursor rows 6 s at a time, while A renews two one-row leases from 8 connections",
      (running) => {
        let next = 0;
        const leases = [hotLease, warmLease];
        return [
          holdRows(broker.databaseUrl, TENANT_A, 6_000, running),
          ...loops(8, running, async () => {
            const lease = leases[next++ % leases.length];
            const answer = await call('POST', `/api/v1/lease/${lease}/extend`, a, { seconds: 3600 });
            return answer.status === 200 && (answer.body as { renewed?: number }).renewed === 0
              ? 'renewed 0'
              : String(answer.status);
          }),
        ];
      },
    ],
    [
      'tenant A opening 1500 discovery polls of a namespace with no queue, each closed after 50-300 ms',
      (running) =>
        loops(1500, running, async () => {
          const gone = new AbortController();
          const timer = setTimeout(() => gone.abort(), 50 + Math.random() * 250);
          const answer = await call(
            'GET',
            '/api/v1/pop?namespace=nobody&wait=true&timeout=600000',
            a,
            undefined,
            {},
            gone.signal,
          );
          clearTimeout(timer);
          return answer.status === 0 ? 'closed' : String(answer.status);
        }),
    ],
    [
      'tenant A holding 4096 pushes whose bodies come a byte every 5 s, reopening each one closed; tenant B pushing on new connections',
      (running) => [
        ...slowBodies(host.hostname, Number(host.port), aWriter, 4_096, running),
        ...loops(1, running, async () => {
          const answer = await freshConnectionPush(broker.base, b);
          await sleep(50);
          return `B ${answer === 0 ? 'reset' : answer}`;
        }),
      ],
    ],
    [
      'tenant A renewing 20 leases of 500 partitions each, 40 in flight',
      (running) => {
        let next = 0;
        return loops(40, running, async () => {
          const lease = wideLeases[next++ % wideLeases.length];
          return String((await call('POST', `/api/v1/lease/${lease}/extend`, a, { seconds: 3600 })).status);
        });
      },
    ],
  ];

  const rows: IsolationRow[] = [];
  for (const [scenario, attack] of scenarios) {
    const wanted = process.env.BENCH_SCENARIO?.split('|');
    if (wanted && !wanted.some((part) => scenario.includes(part))) continue;
    process.stdout.write(`  ${scenario}\n`);
    let on = true;
    const victim = await startVictim(broker.base, b, victimLease, seconds);
    const attackers = attack(() => on);
    const victimAnswers = await victim.answers;
    on = false;
    const rssMb = broker.rssMb();
    const outcomes = await Promise.all(attackers);
    rows.push({ ...summarise(scenario, victimAnswers, outcomes), brokerRssMb: rssMb });
  }
  return rows;
}

/**
 * Starts the victim's loop in a process of its own (bench/victim.ts) and
 * resolves once its connection is open: the answers come when it is done,
 * a second after it was started (the attacker gets going meanwhile) plus
 * `seconds`.
 */
async function startVictim(
  base: string,
  authorization: string,
  leaseId: string,
  seconds: number,
): Promise<{ answers: Promise<Timed[]> }> {
  const child = spawn(
    process.execPath,
    [join(__dirname, 'victim.js'), base, authorization, leaseId, String(seconds), '1000'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => chunk.toString('utf8').includes('ready') && resolve());
    child.once('exit', () => reject(new Error('the victim process exited before it was ready')));
  });
  const answers = new Promise<Timed[]>((resolve) =>
    child.once('exit', () =>
      resolve(
        (JSON.parse(stdout) as Array<{ status: number; renewed?: number; ms: number }>).map((answer) => ({
          status: answer.status,
          ms: answer.ms,
          body: { renewed: answer.renewed },
        })),
      ),
    ),
  );
  return { answers };
}

function summarise(scenario: string, victim: Timed[], attacker: string[]): IsolationRow {
  const latencies = victim.map((answer) => answer.ms).sort((x, y) => x - y);
  const percentile = (p: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0);
  const statuses = new Map<string, number>();
  for (const loop of attacker)
    for (const status of loop.split(',').filter(Boolean)) statuses.set(status, (statuses.get(status) ?? 0) + 1);
  return {
    scenario,
    victimRenewals: victim.length,
    victimP50: percentile(0.5),
    victimP99: percentile(0.99),
    victimMax: Math.round(latencies[latencies.length - 1] ?? 0),
    victimErrors: victim.filter(
      (answer) => answer.status !== 200 || (answer.body as { renewed?: number })?.renewed !== 1,
    ).length,
    attacker:
      [...statuses]
        .sort()
        .map(([status, count]) => `${count}× ${status === '0' ? 'no answer' : status}`)
        .join(', ') || '-',
  };
}

/** `count` loops of `task` while `running()`; each resolves with the statuses it saw, comma-separated. */
function loops(count: number, running: () => boolean, task: () => Promise<string>): Array<Promise<string>> {
  return Array.from({ length: count }, async () => {
    const seen: string[] = [];
    while (running()) {
      seen.push(await task());
      // A call can fail before any I/O (out of descriptors: EMFILE comes through nextTick). Loops that only ever
      // await such failures never let the event loop poll, so the sockets the broker closed are never released, and
      // the run livelocks at full CPU; a turn of the loop between calls lets them go.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return seen.join(',');
  });
}

/**
 * `count` sockets that send half a request line and nothing more, each
 * replaced as soon as the broker cuts it; resolves with how many were cut.
 */
function slowHeaderFlood(host: string, port: number, count: number, running: () => boolean): Array<Promise<string>> {
  let cut = 0;
  const open = new Set<Socket>();
  const one = (): void => {
    if (!running()) return;
    const socket = connect(port, host);
    open.add(socket);
    socket.on('connect', () => socket.write('GET /health HTTP/1.1\r\nX-Slow: '));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      open.delete(socket);
      cut += 1;
      setTimeout(one, 10);
    });
  };
  for (let index = 0; index < count; index += 1) one();
  return [
    (async () => {
      while (running()) await sleep(100);
      for (const socket of open) socket.destroy();
      return Array.from({ length: cut }, () => 'cut').join(',');
    })(),
  ];
}

/** `count` sockets that each write `requests` pipelined requests at once, each replaced when cut. */
function pipelineFlood(
  host: string,
  port: number,
  count: number,
  requests: number,
  running: () => boolean,
): Array<Promise<string>> {
  const burst = Buffer.from('GET /health HTTP/1.1\r\nHost: broker\r\n\r\n'.repeat(requests));
  return Array.from({ length: count }, async () => {
    const seen: string[] = [];
    while (running()) {
      seen.push(
        await new Promise<string>((resolve) => {
          const socket = connect(port, host, () => socket.write(burst));
          // Read and dropped, so that a cut is seen at once.
          socket.on('data', () => undefined);
          socket.on('error', () => undefined);
          socket.on('close', () => resolve('cut'));
          const stop = setInterval(() => !running() && socket.destroy(), 100);
          socket.once('close', () => clearInterval(stop));
        }),
      );
    }
    return seen.join(',');
  });
}

/** A transaction of another session holding every cursor row of a tenant for `holdMs`, again and again. */
function holdRows(databaseUrl: string, tenant: string, holdMs: number, running: () => boolean): Promise<string> {
  return (async () => {
    const session = new Client({ connectionString: databaseUrl });
    await session.connect();
    const held: string[] = [];
    try {
      while (running()) {
        await session.query('BEGIN');
        await session.query('SELECT 1 FROM consumers WHERE tenant_id = $1 FOR UPDATE', [tenant]);
        const until = performance.now() + holdMs;
        while (running() && performance.now() < until) await sleep(50);
        await session.query('COMMIT');
        held.push('held 6 s');
      }
    } finally {
      await session.end();
    }
    return held.join(',');
  })();
}

/**
 * `count` sockets each sending a push's headers (an authenticated tenant) and then its body a byte every 5 s,
 * each reopened as soon as the broker closes it; resolves with what each one was answered.
 */
function slowBodies(
  host: string,
  port: number,
  authorization: string,
  count: number,
  running: () => boolean,
): Array<Promise<string>> {
  const head =
    `POST /api/v1/push HTTP/1.1\r\nHost: broker\r\nAuthorization: ${authorization}\r\n` +
    'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{';
  return Array.from({ length: count }, async () => {
    const seen: string[] = [];
    while (running()) {
      seen.push(
        await new Promise<string>((resolve) => {
          let answer = '';
          const socket = connect(port, host, () => socket.write(head));
          socket.setEncoding('utf8');
          socket.on('data', (chunk: string) => (answer += chunk));
          socket.on('error', () => undefined);
          const drip = setInterval(() => (running() ? socket.write(' ') : socket.destroy()), 5_000);
          const stop = setInterval(() => !running() && socket.destroy(), 200);
          socket.once('close', () => {
            clearInterval(drip);
            clearInterval(stop);
            resolve(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed');
          });
        }),
      );
      await sleep(1_000);
    }
    return seen.join(',');
  });
}

/** A one-message push on a connection of its own, as a client without a pool makes it: its status, 0 if cut. */
function freshConnectionPush(base: string, authorization: string): Promise<number> {
  const body = JSON.stringify({ items: [{ queue: 'fresh', payload: 1 }] });
  return new Promise((resolve) => {
    const outgoing = request(
      `${base}/api/v1/push`,
      {
        method: 'POST',
        agent: new Agent({ keepAlive: false }),
        headers: { authorization, 'content-type': 'application/json', 'content-length': body.length },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    outgoing.on('error', () => resolve(0));
    outgoing.end(body);
  });
}

function gzipBomb(): Buffer {
  const head = '{"items":[{"queue":"bomb","payload":[';
  const tail = '{}]}]}';
  const count = Math.floor((16 * 1024 * 1024 - 64 - head.length - tail.length) / 3);
  return gzipSync(Buffer.from(`${head}${'{},'.repeat(count)}${tail}`), { level: 9 });
}

async function expect201(answer: Promise<Timed>): Promise<void> {
  const { status } = await answer;
  if (status !== 201) throw new Error(`setup push answered ${status}`);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
