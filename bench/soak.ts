import { Client } from 'pg';
import { call, percentile } from './http';

/*
 * Steady traffic for several minutes against a broker running its
 * retention job as shipped (RETENTION_INTERVAL_MS at its default), on a
 * queue with completedRetentionSeconds of a few seconds: producers push at a
 * fixed rate, a consumer group pops and acks as fast as it can. Every few
 * seconds the live rows of `messages` are counted; every 30 s the table is
 * vacuumed as autovacuum would (this machine's PostgreSQL runs with it off).
 * The first and the last minute are compared.
 */

export interface SoakSample {
  second: number;
  rows: number;
  deadRows: number;
}

export interface SoakMinute {
  label: string;
  pushedPerSecond: number;
  pushP99: number;
  consumedPerSecond: number;
  popAckP99: number;
}

export interface SoakResult {
  seconds: number;
  targetPerSecond: number;
  completedRetentionSeconds: number;
  samples: SoakSample[];
  minutes: SoakMinute[];
  errors: number;
  /** What the failed requests answered, grouped, with how often. */
  errorKinds: Record<string, number>;
  retentionRounds: number;
  retentionSeconds: number;
  deleted: number;
  brokerCpuSeconds: number;
}

interface Timed {
  at: number;
  ms: number;
  messages: number;
}

const QUEUE = 'soak';
const BATCH = 10;
const PRODUCERS = 4;
const CONSUMERS = 2;
const SAMPLE_MS = 5_000;
const VACUUM_MS = 30_000;
const COMPLETED_RETENTION_SECONDS = 5;

export async function measureSoak(
  base: string,
  databaseUrl: string,
  seconds: number,
  targetPerSecond: number,
  brokerCpuSeconds: () => number,
): Promise<SoakResult> {
  await call(base, 'POST', '/api/v1/configure', {
    queue: QUEUE,
    options: { completedRetentionSeconds: COMPLETED_RETENTION_SECONDS },
  });
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  const started = performance.now();
  const until = started + seconds * 1000;
  const cpuBefore = brokerCpuSeconds();
  const pushes: Timed[] = [];
  const consumed: Timed[] = [];
  const samples: SoakSample[] = [];
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  const failed = (what: string, status: number, body: unknown): void => {
    errors += 1;
    const error = Array.isArray(body)
      ? body.find((answer: { success?: boolean; error?: string }) => answer.success === false)?.error
      : (body as { error?: string } | undefined)?.error;
    const kind = `${what} ${status}${error ? ` ${error}` : ''}`;
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  let sequence = 0;

  const producer = async (index: number): Promise<void> => {
    // Each producer's share of the rate, in batches, on a fixed schedule (not as fast as it can).
    const everyMs = (1000 * BATCH * PRODUCERS) / targetPerSecond;
    for (let next = started + (index * everyMs) / PRODUCERS; next < until; next += everyMs) {
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
      const items = Array.from({ length: BATCH }, () => ({
        queue: QUEUE,
        partition: `p${sequence % 8}`,
        payload: { n: sequence++, body: 'x'.repeat(200) },
      }));
      const answer = await call(base, 'POST', '/api/v1/push', { items });
      if (answer.status !== 201) failed('push', answer.status, answer.body);
      pushes.push({ at: answer.at, ms: answer.ms, messages: BATCH });
    }
  };
  const consumer = async (): Promise<void> => {
    while (performance.now() < until) {
      const startedAt = performance.now();
      const popped = await call<{ leaseId: string; messages: Array<{ transactionId: string; partitionId: string }> }>(
        base,
        'GET',
        `/api/v1/pop/queue/${QUEUE}?batch=100&partitions=4&wait=true&timeout=1000&consumerGroup=soak`,
      );
      if (popped.status === 204) continue;
      if (popped.status !== 200) {
        failed('pop', popped.status, popped.body);
        continue;
      }
      const acked = await call<Array<{ success: boolean }>>(base, 'POST', '/api/v1/ack/batch', {
        consumerGroup: 'soak',
        acknowledgments: popped.body.messages.map((message) => ({
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: popped.body.leaseId,
        })),
      });
      if (acked.status !== 200 || acked.body.some((answer) => !answer.success)) failed('ack', acked.status, acked.body);
      consumed.push({ at: acked.at, ms: acked.at - startedAt, messages: popped.body.messages.length });
    }
  };
  const sampler = async (): Promise<void> => {
    let lastVacuum = performance.now();
    while (performance.now() < until) {
      await sleep(SAMPLE_MS);
      if (performance.now() - lastVacuum >= VACUUM_MS) {
        await db.query('VACUUM (ANALYZE) messages');
        lastVacuum = performance.now();
      }
      const { rows } = await db.query<{ live: string; dead: string }>(
        `SELECT (SELECT count(*) FROM messages) AS live,
                (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'messages') AS dead`,
      );
      samples.push({
        second: Math.round((performance.now() - started) / 1000),
        rows: Number(rows[0].live),
        deadRows: Number(rows[0].dead),
      });
    }
  };
  await Promise.all([
    ...Array.from({ length: PRODUCERS }, (_unused, index) => producer(index)),
    ...Array.from({ length: CONSUMERS }, () => consumer()),
    sampler(),
  ]);
  const cpu = brokerCpuSeconds() - cpuBefore;
  await db.end();

  const metrics = await (await fetch(`${base}/metrics`)).text();
  const metric = (pattern: RegExp) => [...metrics.matchAll(pattern)].reduce((sum, match) => sum + Number(match[1]), 0);
  const minute = (label: string, from: number, to: number): SoakMinute => {
    const inside = (entry: Timed) => entry.at >= from && entry.at < to;
    const span = (to - from) / 1000;
    const pushed = pushes.filter(inside);
    const popAcks = consumed.filter(inside);
    return {
      label,
      pushedPerSecond: Math.round(pushed.reduce((sum, entry) => sum + entry.messages, 0) / span),
      pushP99: Math.round(
        percentile(
          pushed.map((entry) => entry.ms),
          0.99,
        ),
      ),
      consumedPerSecond: Math.round(popAcks.reduce((sum, entry) => sum + entry.messages, 0) / span),
      popAckP99: Math.round(
        percentile(
          popAcks.map((entry) => entry.ms),
          0.99,
        ),
      ),
    };
  };
  return {
    seconds,
    targetPerSecond,
    completedRetentionSeconds: COMPLETED_RETENTION_SECONDS,
    samples,
    minutes: [minute('first minute', started, started + 60_000), minute('last minute', until - 60_000, until)],
    errors,
    errorKinds,
    retentionRounds: metric(/^leasehold_retention_run_seconds_count (\S+)$/gm),
    retentionSeconds: metric(/^leasehold_retention_run_seconds_sum (\S+)$/gm),
    deleted: metric(/^leasehold_retention_deleted_total\{[^}]*\} (\S+)$/gm),
    brokerCpuSeconds: cpu,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
