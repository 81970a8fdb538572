import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { percentile } from './http';
import { startScratchBroker } from './scratch-broker';
import { ADMIN_URL } from './database';

/*
 * `npm run bench:jit`: a small tenant's first pop and its queue listing, on a database whose JIT thresholds are
 * forced to 0 (as a plan over a big tenant's statistics crosses them). Each of BENCH_JIT_TENANTS tenants pushes one
 * message, then its first pop (a new consumer group) and GET /resources/queues are timed. BENCH_BROKER_ROOT names
 * another built checkout whose broker to run instead of this one. Prints one JSON line.
 */

const DATABASE = process.env.BENCH_DATABASE ?? 'leasehold_bench_jit';
const ROOT = resolve(process.env.BENCH_BROKER_ROOT ?? join(__dirname, '..', '..'));
const TENANTS = Number(process.env.BENCH_JIT_TENANTS ?? 20);
const PORT = Number(process.env.BENCH_PORT ?? 6910);
const HEADER = 'x-bench-tenant';

async function main(): Promise<void> {
  const broker = await startScratchBroker({
    adminUrl: ADMIN_URL,
    database: DATABASE,
    root: ROOT,
    port: PORT,
    env: { TENANT_HEADER: HEADER, DB_POOL_SIZE: '4', RETENTION_INTERVAL_MS: '0' },
    prepare: (admin: Client) => forceJit(admin, DATABASE),
  });
  try {
    const measured = await smallTenantsFirstPops(broker.base, HEADER, TENANTS);
    console.log(JSON.stringify({ root: ROOT, tenants: TENANTS, ...measured }));
  } finally {
    await broker.stop();
  }
}

/** JIT thresholds at 0 for new sessions of `database`, as a plan over a big tenant's statistics crosses them. */
export async function forceJit(admin: Client, database: string): Promise<void> {
  for (const setting of [
    'jit = on',
    'jit_above_cost = 0',
    'jit_inline_above_cost = 0',
    'jit_optimize_above_cost = 0',
  ]) {
    await admin.query(`ALTER DATABASE ${database} SET ${setting}`);
  }
}

export async function resetJit(admin: Client, database: string): Promise<void> {
  for (const setting of ['jit', 'jit_above_cost', 'jit_inline_above_cost', 'jit_optimize_above_cost']) {
    await admin.query(`ALTER DATABASE ${database} RESET ${setting}`);
  }
}

/** `tenants` new tenants (sent in `header`) each push one message, then time their first pop and queue listing. */
export async function smallTenantsFirstPops(
  base: string,
  header: string,
  tenants: number,
): Promise<{ firstPopMs: { p50: number; p90: number }; listingMs: { p50: number; p90: number }; pops: number[] }> {
  const pops: number[] = [];
  const listings: number[] = [];
  for (let index = 0; index < tenants; index += 1) {
    const tenant = crypto.randomUUID();
    const send = async (method: string, path: string, body?: unknown): Promise<number> => {
      const started = performance.now();
      const response = await fetch(`${base}${path}`, {
        method,
        headers: { [header]: tenant, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      await response.arrayBuffer();
      if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status}`);
      return performance.now() - started;
    };
    await send('POST', '/api/v1/push', { items: [{ queue: 'small', payload: { index } }] });
    pops.push(await send('GET', '/api/v1/pop/queue/small?consumerGroup=first&batch=10'));
    listings.push(await send('GET', '/api/v1/resources/queues'));
  }
  const summary = (values: number[]) => ({
    p50: Math.round(percentile(values, 0.5) * 10) / 10,
    p90: Math.round(percentile(values, 0.9) * 10) / 10,
  });
  return { firstPopMs: summary(pops), listingMs: summary(listings), pops };
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
