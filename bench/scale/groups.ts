import { BigDatabase } from './big';
import {
  ackAll,
  count,
  LARGEST,
  ms,
  p50,
  Popped,
  ROUNDS,
  rotated,
  record,
  ScenarioResult,
  send,
  SMALLEST,
  withClient,
} from './common';

/*
 * (1) Groups at any size: a new group's first pop (subscriptionMode=all, the default, with the broker's default
 * timeouts) on each size's queue, whose every partition still holds one message; then a seek of that group to the
 * end and its delete on that queue. Then, on the largest queue, the cursor rows a new group has after touching k
 * partitions (one pop of k partitions, acked).
 */

const SAMPLES = 8;

export async function groups(big: BigDatabase): Promise<ScenarioResult> {
  const firstPop = new Map<number, number[]>();
  const seek = new Map<number, number[]>();
  const remove = new Map<number, number[]>();
  const failures: string[] = [];
  let serial = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const state of rotated(big.sizes, round)) {
      for (let sample = 0; sample < SAMPLES; sample += 1) {
        const { base } = big.broker;
        const group = `new-${(serial += 1)}`;
        const popped = await send<Popped>(
          base,
          state.tenant,
          'GET',
          `/api/v1/pop/queue/${state.queue}?consumerGroup=${group}&wait=false&batch=1`,
        );
        if (popped.status !== 200) failures.push(`first pop at ${count(state.size)}: ${popped.status}`);
        else await ackAll(base, state.tenant, popped.body);
        record(firstPop, state.size, popped.ms);
        // Back to the beginning (the group looks through the partitions again), then to the end.
        for (const target of [{ timestamp: '2000-01-01T00:00:00Z' }, { toEnd: true }]) {
          const sought = await send(
            base,
            state.tenant,
            'POST',
            `/api/v1/consumer-groups/${group}/queues/${state.queue}/seek`,
            target,
          );
          if (sought.status !== 200) failures.push(`seek at ${count(state.size)}: ${sought.status}`);
          record(seek, state.size, sought.ms);
        }
        const deleted = await send(
          base,
          state.tenant,
          'DELETE',
          `/api/v1/consumer-groups/${group}/queues/${state.queue}`,
        );
        if (deleted.status !== 200) failures.push(`delete at ${count(state.size)}: ${deleted.status}`);
        record(remove, state.size, deleted.ms);
      }
    }
  }
  // Cursor rows after touching k partitions, on the largest queue.
  const largest = big.sizes[big.sizes.length - 1];
  const touched: Array<[number, number]> = [];
  for (const k of [1, 10, 100, 1000].filter((k) => k <= largest.size)) {
    const group = `touch-${k}`;
    const popped = await send<Popped>(
      big.broker.base,
      largest.tenant,
      'GET',
      `/api/v1/pop/queue/${largest.queue}?consumerGroup=${group}&wait=false&partitions=${k}&batch=${k}`,
    );
    if (popped.status === 200) await ackAll(big.broker.base, largest.tenant, popped.body);
    const rows = await withClient(big.url, async (client) => {
      const { rows: found } = await client.query<{ n: string }>(
        'SELECT count(*) AS n FROM consumers WHERE tenant_id = $1 AND consumer_group = $2',
        [largest.tenant, group],
      );
      return Number(found[0].n);
    });
    touched.push([k, rows]);
  }

  const at = (map: Map<number, number[]>, size: number) => p50(map.get(size) ?? []);
  const max = (map: Map<number, number[]>, size: number) => Math.max(...(map.get(size) ?? [0]));
  const firstP50 = at(firstPop, LARGEST);
  const seekMax = max(seek, LARGEST);
  const deleteMax = max(remove, LARGEST);
  const failedAtLargest = failures.filter((failure) => failure.includes(`at ${count(LARGEST)}:`));
  const cursorLimit = (k: number) => k + 1000;
  return {
    outcomes: [
      {
        target: `new group's first pop on a ${count(LARGEST)}-partition queue ≤ 100 ms p50`,
        measured: `${ms(firstP50)} p50 (${count(SMALLEST)}: ${ms(at(firstPop, SMALLEST))}; ${firstPop.get(LARGEST)?.length ?? 0} groups)${failedAtLargest.length ? `; ${failedAtLargest.length} failed` : ''}`,
        met: firstP50 <= 100 && failedAtLargest.length === 0,
      },
      {
        target: `seek and delete of a group on the ${count(LARGEST)}-partition queue within the default timeouts (5 s)`,
        measured: `seek ≤ ${ms(seekMax)}, delete ≤ ${ms(deleteMax)} (p50 ${ms(at(seek, LARGEST))}, ${ms(at(remove, LARGEST))})`,
        met: seekMax < 5000 && deleteMax < 5000 && failedAtLargest.length === 0,
      },
      {
        target: 'cursor rows grow with the partitions a group touched, not partitions × groups',
        measured:
          touched.map(([k, rows]) => `${k} touched: ${rows} rows`).join('; ') +
          ` (of ${count(largest.size)} partitions)`,
        met: touched.length > 0 && touched.every(([k, rows]) => rows <= cursorLimit(k)),
      },
    ],
    curves: [
      {
        file: 'scale-groups',
        title: "A new group's first pop, its seek and its delete (p50)",
        xName: 'partitions in the queue',
        yName: 'ms',
        logX: true,
        series: [
          { name: 'first pop', points: big.sizes.map((s) => [s.size, at(firstPop, s.size)]) },
          { name: 'seek (back, then to end)', points: big.sizes.map((s) => [s.size, at(seek, s.size)]) },
          { name: 'delete', points: big.sizes.map((s) => [s.size, at(remove, s.size)]) },
        ],
        limit: { value: 100, name: 'first pop target' },
      },
    ],
    notes: [
      `groups: each new group reads from the beginning (subscriptionMode=all) a queue whose partitions each keep one message; cursor rows judged met when ≤ k + 1000 (one step of looking through partitions by name, 1000 at a time, each with something to read).`,
      ...(failures.length ? [`groups: failures: ${[...new Set(failures)].slice(0, 8).join(', ')}`] : []),
    ],
  };
}
