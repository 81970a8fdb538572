import { Client } from 'pg';
import { BigDatabase } from './big';
import {
  ackAll,
  count,
  expectStatus,
  LARGEST,
  ms,
  p50,
  p99,
  Popped,
  record,
  ROUNDS,
  rotated,
  ScenarioResult,
  send,
  sleep,
  SMALLEST,
  withClient,
} from './common';

/*
 * (2) Claims independent of idle partitions: on each size's queue (N drained partitions and `hot`), a pop of the one
 * message just pushed to `hot`, and an empty `wait=false` pop, interleaved across sizes. Then the shared buffers the
 * database touched per pop, from pg_stat_database (blks_hit + blks_read) around a batch of pops on an otherwise idle
 * database: pg_stat_statements is not preloaded on this server, and a backend reports its counters when it goes idle,
 * at most once a second, so the bench waits for them.
 */

const SAMPLES = 15;
const BUFFER_POPS = 40;
/** A backend flushes its statistics within PGSTAT_IDLE_INTERVAL (10 s) of going idle. */
const STATS_FLUSH_MS = 11_500;

export async function claims(big: BigDatabase): Promise<ScenarioResult> {
  const hot = new Map<number, number[]>();
  const empty = new Map<number, number[]>();
  const failures: string[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const state of rotated(big.sizes, round)) {
      const { base } = big.broker;
      for (let sample = 0; sample < SAMPLES; sample += 1) {
        await expectStatus(
          send(base, state.tenant, 'POST', '/api/v1/push', {
            items: [{ queue: state.queue, partition: 'hot', payload: { sample } }],
          }),
          201,
        );
        const popped = await send<Popped>(
          base,
          state.tenant,
          'GET',
          `/api/v1/pop/queue/${state.queue}?wait=false&batch=10`,
        );
        if (popped.status !== 200 || popped.body.messages.length !== 1) {
          failures.push(`hot pop at ${count(state.size)}: ${popped.status}`);
        } else {
          await expectStatus(ackAll(base, state.tenant, popped.body), 200);
        }
        record(hot, state.size, popped.ms);
        const none = await send(base, state.tenant, 'GET', `/api/v1/pop/queue/${state.queue}?wait=false`);
        if (none.status !== 204) failures.push(`empty pop at ${count(state.size)}: ${none.status}`);
        record(empty, state.size, none.ms);
      }
    }
  }

  const buffers = new Map<number, { empty: number; hot: number }>();
  await withClient(big.url, async (client) => {
    for (const state of big.sizes) {
      const { base } = big.broker;
      const before = await blocks(client, big.database);
      for (let index = 0; index < BUFFER_POPS; index += 1) {
        await send(base, state.tenant, 'GET', `/api/v1/pop/queue/${state.queue}?wait=false`);
      }
      const middle = await blocks(client, big.database);
      await expectStatus(
        send(base, state.tenant, 'POST', '/api/v1/push', {
          items: Array.from({ length: BUFFER_POPS }, (_, index) => ({
            queue: state.queue,
            partition: 'hot',
            payload: { index },
          })),
        }),
        201,
      );
      const pushed = await blocks(client, big.database);
      for (let index = 0; index < BUFFER_POPS; index += 1) {
        const popped = await send<Popped>(
          base,
          state.tenant,
          'GET',
          `/api/v1/pop/queue/${state.queue}?wait=false&batch=1`,
        );
        if (popped.status === 200) await ackAll(base, state.tenant, popped.body);
      }
      const after = await blocks(client, big.database);
      buffers.set(state.size, { empty: (middle - before) / BUFFER_POPS, hot: (after - pushed) / BUFFER_POPS });
    }
  });

  const ratio = (map: Map<number, number[]>) => p50(map.get(LARGEST) ?? []) / p50(map.get(SMALLEST) ?? [1]);
  const hotRatio = ratio(hot);
  const emptyRatio = ratio(empty);
  const smallBuffers = buffers.get(SMALLEST);
  const largeBuffers = buffers.get(LARGEST);
  const bufferRatio = smallBuffers && largeBuffers ? largeBuffers.empty / Math.max(1, smallBuffers.empty) : NaN;
  const atLargest = failures.filter((failure) => failure.includes(`at ${count(LARGEST)}:`));
  return {
    outcomes: [
      {
        target: `hot-partition pop with ${count(LARGEST)} drained partitions ≤ 1.5× of ${count(SMALLEST)}`,
        measured: `${hotRatio.toFixed(2)}× (p50 ${ms(p50(hot.get(LARGEST) ?? []))} vs ${ms(p50(hot.get(SMALLEST) ?? []))}; p99 ${ms(p99(hot.get(LARGEST) ?? []))})`,
        met: hotRatio <= 1.5 && atLargest.length === 0,
      },
      {
        target: `empty wait=false pop with ${count(LARGEST)} drained partitions ≤ 1.5× of ${count(SMALLEST)}`,
        measured: `${emptyRatio.toFixed(2)}× (p50 ${ms(p50(empty.get(LARGEST) ?? []))} vs ${ms(p50(empty.get(SMALLEST) ?? []))})`,
        met: emptyRatio <= 1.5 && atLargest.length === 0,
      },
      {
        target: "the claim's buffers read stay constant as idle partitions grow",
        measured: big.sizes
          .map(
            (s) =>
              `${count(s.size)}: ${buffers.get(s.size)?.empty.toFixed(0)} per empty pop, ${buffers.get(s.size)?.hot.toFixed(0)} per pop+ack`,
          )
          .join('; '),
        // Constant within the noise of the broker's own background statements over a batch.
        met: Number.isFinite(bufferRatio) ? bufferRatio <= 1.5 : undefined,
      },
    ],
    curves: [
      {
        file: 'scale-claims',
        title: 'Pop latency against drained partitions in the queue (p50)',
        xName: 'drained partitions',
        yName: 'ms',
        logX: true,
        series: [
          { name: 'pop of the hot partition', points: big.sizes.map((s) => [s.size, p50(hot.get(s.size) ?? [])]) },
          { name: 'empty wait=false pop', points: big.sizes.map((s) => [s.size, p50(empty.get(s.size) ?? [])]) },
        ],
      },
      {
        file: 'scale-claim-buffers',
        title: 'Shared buffers touched per pop (pg_stat_database)',
        xName: 'drained partitions',
        yName: 'buffers',
        logX: true,
        series: [
          { name: 'per empty pop', points: big.sizes.map((s) => [s.size, buffers.get(s.size)?.empty ?? 0]) },
          { name: 'per pop + ack', points: big.sizes.map((s) => [s.size, buffers.get(s.size)?.hot ?? 0]) },
        ],
      },
    ],
    notes: [
      `claims: ${SAMPLES} samples per size per round, ${ROUNDS} rounds; buffers are blks_hit + blks_read of the whole database over ${BUFFER_POPS} pops (every statement of the pop, the broker's background statements of those seconds included), read after the counters were flushed; judged met when the largest size touches ≤ 1.5× the smallest's.`,
      ...(failures.length ? [`claims: failures: ${[...new Set(failures)].slice(0, 8).join(', ')}`] : []),
    ],
  };
}

async function blocks(client: Client, database: string): Promise<number> {
  await sleep(STATS_FLUSH_MS);
  await client.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await client.query<{ n: string }>(
    'SELECT blks_hit + blks_read AS n FROM pg_stat_database WHERE datname = $1',
    [database],
  );
  return Number(rows[0].n);
}
