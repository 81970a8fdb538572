import { Pool } from 'pg';
import { call, percentile } from './http';

/*
 * How soon a parked long poll gets a batch that became claimable again:
 * after a nack (from the nack's answer to the poll's answer), and after a
 * lease ends unrenewed (from the lease's expiry by the database clock to
 * the poll's answer), and after a message of a queue with delayedProcessing
 * comes due (from its due instant to the poll's answer). The batch is held, or
 * the message pushed, through broker `a`; the poll parks
 * on `a` itself or on `b`, another process on the same database, which can
 * only hear of it by NOTIFY (nack) or its expiry sweep (expiry).
 */

export interface WakeupRow {
  scenario: string;
  rounds: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
}

const ROUNDS = 20;
const AT_ONCE = 5;
/** Long enough that an answer can only come from a wakeup. */
const POLL_TIMEOUT_MS = 30_000;
/** Time for the poll to reach the broker and park before the event; a benchmark, not a test. */
const PARK_MS = 300;

interface Popped {
  leaseId: string;
  partitionId: string;
  messages: Array<{ transactionId: string }>;
}

export async function measureWakeups(a: string, b: string, databaseUrl: string): Promise<WakeupRow[]> {
  const db = new Pool({ connectionString: databaseUrl, max: AT_ONCE });
  try {
    const rows: WakeupRow[] = [];
    for (const [event, run] of [
      ['nack', nackRound],
      ['lease expiry', expiryRound],
      ['delayedProcessing coming due', delayedRound],
    ] as const) {
      for (const [where, poller] of [
        ['same process', a],
        ['other process', b],
      ] as const) {
        const latencies: number[] = [];
        let errors = 0;
        for (let start = 0; start < ROUNDS; start += AT_ONCE) {
          const results = await Promise.all(
            Array.from({ length: Math.min(AT_ONCE, ROUNDS - start) }, (_, index) =>
              run(a, poller, db, `bench-wake-${event.replace(' ', '-')}-${where.replace(' ', '-')}-${start + index}`),
            ),
          );
          for (const latency of results) {
            if (latency === undefined) errors += 1;
            else latencies.push(latency);
          }
        }
        const at = (p: number) => Math.round(percentile(latencies, p));
        rows.push({
          scenario: `${event}, poll parked in the ${where}`,
          rounds: latencies.length,
          p50: at(0.5),
          p99: at(0.99),
          max: Math.round(Math.max(0, ...latencies)),
          errors,
        });
      }
    }
    return rows;
  } finally {
    await db.end();
  }
}

/** Milliseconds from the nack's answer to the parked poll's answer; undefined when something went wrong. */
async function nackRound(a: string, poller: string, _db: Pool, queue: string): Promise<number | undefined> {
  await push(a, queue);
  const held = await call<Popped>(a, 'GET', `/api/v1/pop/queue/${queue}?leaseSeconds=60`);
  if (held.status !== 200) return undefined;
  const poll = call<Popped>(poller, 'GET', `/api/v1/pop/queue/${queue}?wait=true&timeout=${POLL_TIMEOUT_MS}`);
  await sleep(PARK_MS);
  const nack = await call<unknown>(a, 'POST', '/api/v1/ack', {
    transactionId: held.body.messages[0].transactionId,
    partitionId: held.body.partitionId,
    leaseId: held.body.leaseId,
    status: 'failed',
  });
  const woken = await poll;
  if (nack.status !== 200 || woken.status !== 200) return undefined;
  return woken.at - nack.at;
}

/** Milliseconds from the lease's expiry (database clock) to the parked poll's answer. */
async function expiryRound(a: string, poller: string, db: Pool, queue: string): Promise<number | undefined> {
  await push(a, queue);
  const held = await call<Popped>(a, 'GET', `/api/v1/pop/queue/${queue}?leaseSeconds=1`);
  if (held.status !== 200) return undefined;
  const poll = call<Popped>(poller, 'GET', `/api/v1/pop/queue/${queue}?wait=true&timeout=${POLL_TIMEOUT_MS}`);
  const { rows } = await db.query<{ expires_ms: string }>(
    'SELECT (extract(epoch FROM max(lease_expires_at)) * 1000)::bigint AS expires_ms FROM consumers WHERE lease_id = $1',
    [held.body.leaseId],
  );
  const woken = await poll;
  if (woken.status !== 200 || rows[0]?.expires_ms == null) return undefined;
  return Date.now() - (performance.now() - woken.at) - Number(rows[0].expires_ms);
}

/** Milliseconds from the instant a delayed message comes due (database clock) to the parked poll's answer. */
async function delayedRound(a: string, poller: string, db: Pool, queue: string): Promise<number | undefined> {
  const configured = await call<unknown>(a, 'POST', '/api/v1/configure', { queue, options: { delayedProcessing: 1 } });
  if (configured.status !== 200) return undefined;
  const poll = call<Popped>(poller, 'GET', `/api/v1/pop/queue/${queue}?wait=true&timeout=${POLL_TIMEOUT_MS}`);
  await sleep(PARK_MS);
  await push(a, queue);
  const woken = await poll;
  const { rows } = await db.query<{ due_ms: string }>(
    `SELECT (extract(epoch FROM m.created_at + interval '1 second') * 1000)::bigint AS due_ms
       FROM messages m
       JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
       JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
      WHERE q.name = $1`,
    [queue],
  );
  if (woken.status !== 200 || rows[0]?.due_ms == null) return undefined;
  return Date.now() - (performance.now() - woken.at) - Number(rows[0].due_ms);
}

async function push(base: string, queue: string): Promise<void> {
  const pushed = await call<unknown>(base, 'POST', '/api/v1/push', { items: [{ queue, payload: { queue } }] });
  if (pushed.status !== 201) throw new Error(`push answered ${pushed.status}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
