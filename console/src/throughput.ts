import { QueueSummary } from './api';

/**
 * Rates come from the counters the queue listing already has, sampled by the
 * refresh cycle: messages ever stored (in) and stored minus pending (out,
 * as far as the slowest group is concerned). No route of the broker keeps a
 * history for the console.
 */
const KEEP = 60;

interface Sample {
  at: number;
  stored: number;
  consumed: number;
}

const samples = new Map<string, Sample[]>();

export function record(queues: QueueSummary[], at = Date.now()): void {
  for (const queue of queues) {
    const list = samples.get(queue.name) ?? [];
    const last = list[list.length - 1];
    if (last && at - last.at < 500) continue;
    list.push({ at, stored: queue.messages, consumed: queue.messages - queue.pending });
    if (list.length > KEEP + 1) list.shift();
    samples.set(queue.name, list);
  }
}

export interface Rates {
  in: number[];
  out: number[];
}

export function ratesOf(queue: string): Rates {
  const list = samples.get(queue) ?? [];
  const rates: Rates = { in: [], out: [] };
  for (let i = 1; i < list.length; i++) {
    const seconds = (list[i].at - list[i - 1].at) / 1000;
    rates.in.push(Math.max(0, (list[i].stored - list[i - 1].stored) / seconds));
    rates.out.push(Math.max(0, (list[i].consumed - list[i - 1].consumed) / seconds));
  }
  return rates;
}
