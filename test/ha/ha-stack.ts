import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'ha', 'stack.sh');

export const HA_DIR = process.env.HA_DIR ?? '/tmp/leasehold-ha';
/** As scripts/ha/stack.sh lays out its ports; the test's brokers take the next four. */
const BASE = Number(process.env.HA_PORT_BASE ?? 54330);
export const HAPROXY_URL = `postgres://postgres@127.0.0.1:${BASE}`;
const REST_PORTS = [BASE + 3, BASE + 4];
export const BROKER_PORTS: Record<Replication, number[]> = { sync: [BASE + 7, BASE + 8], async: [BASE + 9, BASE + 10] };

export type Replication = 'sync' | 'async';

export interface Member {
  name: string;
  /** leader, replica, sync_standby */
  role: string;
  state: string;
  port: number;
  timeline?: number;
  /** Bytes behind the leader; Patroni leaves it out (or says "unknown") while it cannot tell. */
  lag?: number | string;
}

/** The stack of scripts/ha/stack.sh: what a developer starts by hand, started the same way. */
export const haStack = {
  async start(replication: Replication): Promise<void> {
    await run('bash', [SCRIPT, 'start', replication], { env: { ...process.env, HA_DIR }, timeout: 300_000 });
  },

  async stop(): Promise<void> {
    await run('bash', [SCRIPT, 'stop'], { env: { ...process.env, HA_DIR }, timeout: 120_000 });
  },

  /** Patroni's view, from whichever node's REST API answers. */
  async members(): Promise<Member[]> {
    for (const port of REST_PORTS) {
      try {
        const response = await fetch(`http://127.0.0.1:${port}/cluster`, { signal: AbortSignal.timeout(1_000) });
        if (response.ok) return ((await response.json()) as { members: Member[] }).members;
      } catch {
        // that node's Patroni is busy or down: ask the other
      }
    }
    return [];
  },

  async leader(): Promise<Member | undefined> {
    return (await this.members()).find((member) => member.role === 'leader' && member.state === 'running');
  },

  /** SIGKILL to the postmaster of `member`, as a crash of the primary's server would be. */
  killPostmaster(member: Member): number {
    const pid = Number(readFileSync(join(HA_DIR, member.name, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGKILL');
    return pid;
  },
};
