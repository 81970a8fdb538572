import { Client } from 'pg';
import {
  ackAll,
  BASE_PORT,
  Broker,
  createDatabase,
  DATABASE_PREFIX,
  expectStatus,
  Popped,
  send,
  SIZES,
  startBroker,
  withClient,
} from './common';
import { seedQueue, uuidOf, vacuumAnalyze } from './seed';

/*
 * The database the size scenarios share: for each size N, a tenant of its own with queue `drained-N` of N partitions
 * whose one message each the queue-mode group has consumed, nine more groups still looking through the partitions
 * (cursors on the first 1000), and a partition `hot` made by a push, popped and acked. With the default sizes the
 * database holds 1,110,100 partitions.
 */

export const GROUPS_PER_QUEUE = 10;

export interface SizeState {
  size: number;
  tenant: string;
  queue: string;
}

export interface BigDatabase {
  database: string;
  url: string;
  sizes: SizeState[];
  broker: Broker;
  /** Stop the broker and start it again (new sessions see database-level settings), same port and database. */
  restart(env?: Record<string, string>): Promise<void>;
  seedSeconds: number;
  partitions: number;
  /** Checks of the seeded state through HTTP that failed (the scenarios then run anyway and say what they see). */
  checkFailures: string[];
}

export const BIG_ENV: Record<string, string> = { DB_POOL_SIZE: '10' };

export async function prepareBig(log: (line: string) => void): Promise<BigDatabase> {
  const database = `${DATABASE_PREFIX}_big`;
  const url = await createDatabase(database);
  const port = BASE_PORT;
  // The broker migrates the new database at start.
  let broker = await startBroker({ databaseUrl: url, port, env: BIG_ENV });
  const sizes: SizeState[] = SIZES.map((size, index) => ({
    size,
    tenant: uuidOf(0x7e000000 + index, size),
    queue: `drained-${size}`,
  }));
  const started = performance.now();
  await withClient(url, async (client: Client) => {
    for (const [index, state] of sizes.entries()) {
      const begun = performance.now();
      await seedQueue(client, {
        family: 0x1000 * (index + 1),
        tenant: state.tenant,
        queue: state.queue,
        partitions: state.size,
        groups: GROUPS_PER_QUEUE - 1,
      });
      log(`seeded ${state.queue}: ${state.size} partitions in ${((performance.now() - begun) / 1000).toFixed(1)} s`);
    }
    await vacuumAnalyze(client);
  });
  const seedSeconds = (performance.now() - started) / 1000;
  log(`seeded and vacuumed in ${seedSeconds.toFixed(0)} s`);
  // Statistics and plans as of the seeded state.
  await broker.stop();
  broker = await startBroker({ databaseUrl: url, port, env: BIG_ENV });
  const big: BigDatabase = {
    database,
    url,
    sizes,
    broker,
    seedSeconds,
    partitions: SIZES.reduce((sum, size) => sum + size + 1, 0),
    checkFailures: [],
    restart: async (env = {}) => {
      await big.broker.stop();
      big.broker = await startBroker({ databaseUrl: url, port, env: { ...BIG_ENV, ...env } });
    },
  };
  for (const state of sizes) {
    await checkSeeded(big, state).catch((error: unknown) => {
      big.checkFailures.push(String(error));
      log(String(error));
    });
  }
  return big;
}

/** The seeded state behaves as the broker's own: drained partitions deliver nothing; a push to `hot` is delivered once. */
async function checkSeeded(big: BigDatabase, state: SizeState): Promise<void> {
  const { base } = big.broker;
  const step = (what: string) => (error: unknown) => {
    throw new Error(`seeded ${state.queue}, ${what}: ${String(error)}`);
  };
  const empty = await send(base, state.tenant, 'GET', `/api/v1/pop/queue/${state.queue}?wait=false`);
  if (empty.status !== 204) throw new Error(`seeded ${state.queue}: a pop answered ${empty.status}, not 204`);
  await expectStatus(
    send(base, state.tenant, 'POST', '/api/v1/push', {
      items: [{ queue: state.queue, partition: 'hot', payload: { check: true } }],
    }),
    201,
  ).catch(step('push to hot'));
  const popped = await expectStatus(
    send<Popped>(base, state.tenant, 'GET', `/api/v1/pop/queue/${state.queue}?wait=false&batch=10`),
    200,
  ).catch(step('pop of hot'));
  if (popped.body.messages.length !== 1)
    throw new Error(`seeded ${state.queue}: popped ${popped.body.messages.length}`);
  await expectStatus(ackAll(base, state.tenant, popped.body), 200).catch(step('ack'));
  const after = await send(base, state.tenant, 'GET', `/api/v1/pop/queue/${state.queue}?wait=false`);
  if (after.status !== 204) throw new Error(`seeded ${state.queue}: after the ack a pop answered ${after.status}`);
}
