import { readdirSync, readFileSync, rmSync } from 'node:fs';

/** Processes other than this one and jest's workers that carry this run's mark: brokers a failed test left. */
function leftBehind(mark: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      if (!environ.includes(`LEASEHOLD_TEST_RUN=${mark}`)) continue;
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('jest-worker')) continue;
      found.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

export default async function globalTeardown(): Promise<void> {
  await globalThis.__LEASEHOLD_EMBEDDED__?.stop();
  globalThis.__LEASEHOLD_EMBEDDED__ = undefined;
  const mark = process.env.LEASEHOLD_TEST_RUN;
  if (mark && process.platform === 'linux') {
    for (const pid of leftBehind(mark)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  const root = globalThis.__LEASEHOLD_TEST_ROOT__;
  if (root) rmSync(root, { recursive: true, force: true });
}
