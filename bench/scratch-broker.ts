import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { dropDatabase, recreateDatabase } from './database';
import { startFlags } from './start-flags';

/** A database of the benchmark's own and a broker process on it, both gone again with stop(). */
export interface ScratchBroker {
  base: string;
  databaseUrl: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * `root` is the built checkout whose broker runs (BENCH_BROKER_ROOT), so one benchmark measures this commit's broker
 * and an older one alike. `prepare` runs on the new, empty database before the broker starts (and migrates it).
 */
export async function startScratchBroker(options: {
  adminUrl: string;
  database: string;
  root: string;
  port: number;
  env: Record<string, string>;
  prepare?: (admin: Client) => Promise<void>;
}): Promise<ScratchBroker> {
  const { adminUrl, database, root, port, env, prepare } = options;
  const databaseUrl = await recreateDatabase(adminUrl, database);
  if (prepare) {
    const admin = new Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      await prepare(admin);
    } finally {
      await admin.end();
    }
  }
  const child = spawn(process.execPath, [...startFlags(root), join(root, 'dist', 'src', 'main.js')], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      JWT_ENABLED: 'false',
      NODE_ENV: 'production',
      LOG_REQUESTS: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout?.resume();
  const base = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await dropDatabase(adminUrl, database);
  };
  try {
    await untilReady(base, child);
  } catch (error) {
    await stop();
    throw error;
  }
  return { base, databaseUrl, process: child, stop };
}

async function untilReady(base: string, child: ChildProcess): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt += 1) {
    if (child.exitCode !== null) throw new Error(`the broker exited with ${child.exitCode} before it was ready`);
    const ready = await fetch(`${base}/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${base} was not ready within a minute`);
}
