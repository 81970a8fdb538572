import { BigDatabase } from './big';
import {
  count,
  LARGEST,
  METRICS_TOKEN,
  ms,
  p50,
  p99,
  record,
  ROUNDS,
  rotated,
  ScenarioResult,
  send,
  SMALLEST,
} from './common';

/*
 * (5) Observation at size: /metrics scraped (with its token) over the whole big database, and whether each seeded
 * queue has its depth and lag series; the listings a read-only token may call, per size (each size's tenant has its
 * one queue of N partitions and 10 groups), interleaved. A listing that is slow gets fewer samples (at most about
 * 10 s of them per size and round), so that a broker past its timeouts does not hold the run for an hour.
 */

const SCRAPES = 10;
const SAMPLES = 20;
const BUDGET_MS = 5_000;

const routes = (queue: string): Array<[string, string]> => [
  ['GET /api/v1/consumer-groups', '/api/v1/consumer-groups'],
  ['GET /api/v1/consumer-groups/lagging', '/api/v1/consumer-groups/lagging'],
  ['GET /api/v1/resources/queues/:queue', `/api/v1/resources/queues/${queue}`],
];

export async function observation(big: BigDatabase): Promise<ScenarioResult> {
  const scrapes: number[] = [];
  let text = '';
  const scrapeStatuses = new Set<number>();
  for (let index = 0; index < SCRAPES; index += 1) {
    const scraped = await send<string>(big.broker.base, `Bearer ${METRICS_TOKEN}`, 'GET', '/metrics');
    scrapes.push(scraped.ms);
    scrapeStatuses.add(scraped.status);
    text = typeof scraped.body === 'string' ? scraped.body : '';
  }
  const has = (metric: string, queue: string) =>
    text.split('\n').some((line) => line.startsWith(`${metric}{`) && line.includes(`queue="${queue}"`));
  const missing: string[] = [];
  for (const state of big.sizes) {
    if (!has('leasehold_queue_depth_messages', state.queue)) missing.push(`depth of ${state.queue}`);
    if (!has('leasehold_consumer_lag_messages', state.queue)) missing.push(`lag of ${state.queue}`);
  }

  const latencies = new Map<string, Map<number, number[]>>();
  const failures = new Set<string>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const state of rotated(big.sizes, round)) {
      for (const [name, path] of routes(state.queue)) {
        const map = latencies.get(name) ?? new Map<number, number[]>();
        latencies.set(name, map);
        let spent = 0;
        for (let sample = 0; sample < SAMPLES && spent < BUDGET_MS; sample += 1) {
          const answer = await send(big.broker.base, state.tenant, 'GET', path);
          if (answer.status !== 200) failures.add(`${name} at ${count(state.size)}: ${answer.status}`);
          record(map, state.size, answer.ms);
          spent += answer.ms;
        }
      }
    }
  }
  const scrapeP50 = p50(scrapes);
  const listingOutcomes = [...latencies.entries()].map(([name, map]) => {
    const worst = p99(map.get(LARGEST) ?? []);
    const failed = [...failures].filter((failure) => failure.startsWith(`${name} at ${count(LARGEST)}:`));
    return {
      target: `${name} ≤ 200 ms p99 at ${count(LARGEST)} partitions × 10 groups`,
      measured: `${ms(worst)} p99 (${count(SMALLEST)}: ${ms(p99(map.get(SMALLEST) ?? []))}; ${map.get(LARGEST)?.length ?? 0} samples)${failed.length ? `; ${failed.join(', ')}` : ''}`,
      met: worst <= 200 && failed.length === 0,
    };
  });
  return {
    outcomes: [
      {
        target: `/metrics ≤ 250 ms with every queue's depth and lag series at ${(big.partitions / 1e6).toFixed(2)}M partitions`,
        measured: `${ms(scrapeP50)} p50, ${ms(Math.max(...scrapes))} max (status ${[...scrapeStatuses].join('/')}); ${missing.length ? `missing: ${missing.join(', ')}` : 'all series present'}`,
        met:
          Math.max(...scrapes) <= 250 && missing.length === 0 && scrapeStatuses.size === 1 && scrapeStatuses.has(200),
      },
      ...listingOutcomes,
    ],
    curves: [
      {
        file: 'scale-listings',
        title: 'Listings a read-only token may call (p99), 10 groups per queue',
        xName: 'partitions in the tenant',
        yName: 'ms',
        logX: true,
        series: [...latencies.entries()].map(([name, map]) => ({
          name: name.replace('GET /api/v1', ''),
          points: big.sizes.map((s) => [s.size, p99(map.get(s.size) ?? [])] as [number, number]),
        })),
        limit: { value: 200, name: 'target' },
      },
    ],
    notes: [
      `observation: ${SCRAPES} scrapes of /metrics over ${big.partitions.toLocaleString('en')} partitions in ${big.sizes.length} tenants; listings ${SAMPLES} samples per size and round (at most ${BUDGET_MS / 1000} s of them), ${ROUNDS} rounds. The nine groups besides the queue-mode group are still looking through the partitions, with unread cursors on the first 1000.`,
      ...(failures.size ? [`observation: failures: ${[...failures].slice(0, 8).join(', ')}`] : []),
    ],
  };
}
