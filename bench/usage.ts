import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** What the benchmarks read of a process's usage from /proc. */

/** User and system CPU the process has used, in seconds. */
export function cpuSeconds(child: ChildProcess): number {
  const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The CPU seconds the broker and every PostgreSQL process use from this call on, read when the result is called. */
export function cpuFrom(broker: ChildProcess): () => { broker: number; postgres: number } {
  const brokerBefore = cpuSeconds(broker);
  const postgresBefore = postgresCpu();
  return () => ({ broker: cpuSeconds(broker) - brokerBefore, postgres: postgresCpuSince(postgresBefore) });
}

/** CPU seconds used so far by each PostgreSQL process on this machine, by pid. */
export function postgresCpu(): Map<string, number> {
  const used = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const fields = stat.split(') ')[1].split(' ');
      used.set(entry, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // the process ended meanwhile
    }
  }
  return used;
}

/**
 * CPU seconds PostgreSQL used since `before` (postgresCpu()), in its
 * processes alive now: a backend that ended meanwhile takes its share along,
 * so measure with the connections that do the work still open.
 */
export function postgresCpuSince(before: Map<string, number>): number {
  let total = 0;
  for (const [pid, seconds] of postgresCpu()) total += seconds - (before.get(pid) ?? 0);
  return total;
}

/** Resident memory in MB. */
export function rss(child: ChildProcess): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}
