import { Client } from 'pg';

/*
 * Many-partition draining: PARTITIONS partitions of one message each, pushed
 * in batches, then drained by 4 consumers of one group, each popping
 * (without wait) and acking what it got until the queue answers 204. Judged
 * in messages per second from the first pop to the last ack. Statistics are
 * refreshed (VACUUM ANALYZE) after loading, as autovacuum would on a server
 * that has it on.
 */

export interface DrainRow {
  scenario: string;
  consumers: number;
  messages: number;
  seconds: number;
  messagesPerSecond: number;
  pops: number;
  popP50: number;
  popP99: number;
  ackP50: number;
  ackP99: number;
  errors: number;
}

const CONSUMERS = 4;
const PUSH_BATCH = 500;

interface PopAnswer {
  leaseId: string;
  messages: Array<{ transactionId: string; partitionId: string }>;
}

export async function measureDrain(base: string, databaseUrl: string, partitions: number, query: string, label: string): Promise<DrainRow> {
  const queue = `bench-drain-${label.replace(/\W+/g, '-')}`;
  const call = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T; ms: number }> => {
    const started = performance.now();
    const response = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T, ms: performance.now() - started };
  };

  for (let start = 0; start < partitions; start += PUSH_BATCH) {
    const items = [];
    for (let index = start; index < Math.min(partitions, start + PUSH_BATCH); index += 1) {
      items.push({ queue, partition: `d${index}`, payload: { index } });
    }
    const pushed = await call('POST', '/api/v1/push', { items });
    if (pushed.status !== 201) throw new Error(`push answered ${pushed.status}`);
  }
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('VACUUM ANALYZE');
  await db.end();

  const popMs: number[] = [];
  const ackMs: number[] = [];
  let messages = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONSUMERS }, async () => {
      for (;;) {
        const popped = await call<PopAnswer>('GET', `/api/v1/pop/queue/${queue}?${query}&leaseSeconds=60`);
        popMs.push(popped.ms);
        if (popped.status === 204) return;
        if (popped.status !== 200) {
          errors += 1;
          continue;
        }
        const acked = await call<Array<{ success: boolean }>>('POST', '/api/v1/ack/batch', {
          acknowledgments: popped.body.messages.map((message) => ({
            transactionId: message.transactionId,
            partitionId: message.partitionId,
            leaseId: popped.body.leaseId,
            status: 'completed',
          })),
        });
        ackMs.push(acked.ms);
        if (acked.status !== 200 || acked.body.some((answer) => !answer.success)) errors += 1;
        messages += popped.body.messages.length;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  if (messages !== partitions) errors += Math.abs(partitions - messages);
  return {
    scenario: `drain ${partitions} one-message partitions, ${query.replace(/&/g, ', ')}`,
    consumers: CONSUMERS,
    messages,
    seconds: Math.round(seconds * 10) / 10,
    messagesPerSecond: Math.round(messages / seconds),
    pops: popMs.length,
    popP50: percentile(popMs, 0.5),
    popP99: percentile(popMs, 0.99),
    ackP50: percentile(ackMs, 0.5),
    ackP99: percentile(ackMs, 0.99),
    errors,
  };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0) * 10) / 10;
}
