import { measure } from '../poll-memory';
import { ScenarioResult } from './common';

/*
 * (6b) What one parked poll costs the broker, apart from its connection: bench/poll-memory.ts's measurement (raw
 * keep-alive sockets each first complete one request and stay idle, the broker is measured, then each sends a long
 * poll that parks, and it is measured again; heap + external after full collections). The `tenants` scenario's
 * per-poll figure includes each poll's connection and its tenant's state (a token, limits, a queue) beside it.
 */

const COUNTS = [5_000, 10_000];

export async function polls(): Promise<ScenarioResult> {
  const rows = [];
  for (const count of COUNTS) rows.push(await measure(count, false));
  const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
  const worst = Math.max(...rows.map((row) => row.pollHeapBytes));
  return {
    outcomes: [
      {
        target: 'a parked poll costs ≤ 5 KB of broker memory (over the idle connection it came on)',
        measured: rows
          .map(
            (row) =>
              `${kb(row.pollHeapBytes)} at ${row.polls.toLocaleString('en')} (RSS ${kb(row.pollRssBytes)}; the idle connection itself ${kb(row.connectionHeapBytes)})`,
          )
          .join('; '),
        met: worst <= 5 * 1024,
      },
    ],
    curves: [],
    notes: [
      `polls: bench/poll-memory.ts at ${COUNTS.map((count) => count.toLocaleString('en')).join(' and ')} polls, each on its own partition of one queue, on a broker of its own (npm start's flags plus --expose-gc); heap + external after three full collections, growth from the idle connections to the parked polls, per poll. Single wakes of one of N: ${rows.map((row) => `${row.singleWakeP50.toFixed(1)} / ${row.singleWakeP99.toFixed(1)} ms p50 / p99`).join(', ')}.`,
    ],
  };
}
