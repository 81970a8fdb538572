import { vacuumAnalyze } from './database';
import { call, percentile, popAndAck } from './http';

/*
 * Many-partition draining: PARTITIONS partitions of one message each, pushed
 * in batches, then drained by 4 consumers of one group, each popping
 * (without wait) and acking what it got until the queue answers 204. Judged
 * in messages per second from the first pop to the last ack. Statistics are
 * refreshed (VACUUM ANALYZE) after loading, as autovacuum would on a server
 * that has it on, unless `refresh` is false: then the planner sees the tables
 * as a new tenant's burst leaves them until autovacuum's next pass.
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

export async function measureDrain(
  base: string,
  databaseUrl: string,
  partitions: number,
  query: string,
  label: string,
  refresh = true,
  draining: () => void = () => undefined,
): Promise<DrainRow> {
  const queue = `bench-drain-${label.replace(/\W+/g, '-')}`;

  for (let start = 0; start < partitions; start += PUSH_BATCH) {
    const items = [];
    for (let index = start; index < Math.min(partitions, start + PUSH_BATCH); index += 1) {
      items.push({ queue, partition: `d${index}`, payload: { index } });
    }
    const pushed = await call(base, 'POST', '/api/v1/push', { items });
    if (pushed.status !== 201) throw new Error(`push answered ${pushed.status}`);
  }
  if (refresh) await vacuumAnalyze(databaseUrl);

  const popMs: number[] = [];
  const ackMs: number[] = [];
  let messages = 0;
  let errors = 0;
  draining();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONSUMERS }, async () => {
      for (;;) {
        const step = await popAndAck(base, `/api/v1/pop/queue/${queue}?${query}&leaseSeconds=60`);
        popMs.push(step.popMs);
        if (step.status === 204) return;
        if (step.failed) errors += 1;
        if (step.ackMs !== undefined) ackMs.push(step.ackMs);
        messages += step.messages;
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
    popP50: tenths(percentile(popMs, 0.5)),
    popP99: tenths(percentile(popMs, 0.99)),
    ackP50: tenths(percentile(ackMs, 0.5)),
    ackP99: tenths(percentile(ackMs, 0.99)),
    errors,
  };
}

function tenths(ms: number): number {
  return Math.round(ms * 10) / 10;
}
