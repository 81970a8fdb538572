import { Client } from 'pg';
import {
  ackAll,
  ADMIN_URL,
  BASE_PORT,
  Broker,
  createDatabase,
  DATABASE_PREFIX,
  dropDatabase,
  ms,
  p50,
  p99,
  Popped,
  ScenarioResult,
  send,
  sleep,
  startBroker,
  Timed,
} from './common';
import { uuidOf } from './seed';

/*
 * (7) Sixteen broker processes on one PostgreSQL, with the default pool settings, under load: each runs push → pop →
 * ack loops and holds parked long polls, while connections to the database are counted every 200 ms
 * (pg_stat_activity) and polls parked on one process are woken by pushes through another. The PostgreSQL server is
 * shared: when the whole server's connections come within GUARD of max_connections the load stops (and the figure
 * says so), so that other clients of the server are never refused.
 */

const BROKERS = 16;
const LOAD_MS = 40_000;
const WAKE_ROUNDS = 40;
const GUARD = 5;

export async function brokers(): Promise<ScenarioResult> {
  const database = `${DATABASE_PREFIX}_brokers`;
  const url = await createDatabase(database);
  const tenant = uuidOf(0x7b000000, 1);
  const started: Broker[] = [];
  const monitor = new Client({ connectionString: ADMIN_URL });
  await monitor.connect();
  try {
    const { rows } = await monitor.query<{ max: string }>("SELECT current_setting('max_connections') AS max");
    const maxConnections = Number(rows[0].max);
    let peak = 0;
    let serverPeak = 0;
    let guarded = false;
    let sampling = true;
    const sample = async () => {
      while (sampling) {
        const { rows: counted } = await monitor.query<{ ours: string; all: string }>(
          'SELECT count(*) FILTER (WHERE datname = $1) AS ours, count(*) AS all FROM pg_stat_activity WHERE backend_type = $2',
          [database, 'client backend'],
        );
        peak = Math.max(peak, Number(counted[0].ours));
        serverPeak = Math.max(serverPeak, Number(counted[0].all));
        if (Number(counted[0].all) >= maxConnections - GUARD) guarded = true;
        await sleep(200);
      }
    };
    const sampler = sample();
    // One at a time: before each, the server must have room for one more broker's connections as counted so far.
    const serverNow = async () => {
      const { rows: counted } = await monitor.query<{ ours: string; all: string }>(
        'SELECT count(*) FILTER (WHERE datname = $1) AS ours, count(*) AS all FROM pg_stat_activity WHERE backend_type = $2',
        [database, 'client backend'],
      );
      return { ours: Number(counted[0].ours), all: Number(counted[0].all) };
    };
    let refused = '';
    let loadedPeak = 0;
    for (let index = 0; index < BROKERS && !guarded; index += 1) {
      // Room for one more broker as loaded as the busiest so far: a pool opens connections under load.
      const now = await serverNow();
      const perBroker = index === 0 ? 0 : Math.ceil(loadedPeak / index);
      if (now.all + perBroker >= maxConnections - GUARD) {
        refused = `broker ${index + 1} not started: ${index} held up to ${loadedPeak} connections under load (${perBroker} each), the server had ${now.all} of ${maxConnections}`;
        break;
      }
      started.push(await startBroker({ databaseUrl: url, port: BASE_PORT + 10 + index }));
      const before = peak;
      peak = 0;
      await load(
        started,
        tenant,
        () => !guarded,
        2000,
        () => undefined,
      );
      loadedPeak = Math.max(loadedPeak, peak);
      peak = Math.max(before, peak);
    }
    const end = performance.now() + LOAD_MS;
    const running = () => !guarded && performance.now() < end;
    const errors = new Map<string, number>();
    const count = (status: string) => errors.set(status, (errors.get(status) ?? 0) + 1);
    const loops = guarded ? Promise.resolve() : load(started, tenant, running, LOAD_MS, count);
    // Polls parked on process i, woken by a push through process i + 1; interleaved with the control, a push through
    // process i itself, which no NOTIFY carries: what the loaded machine adds to any wake, across processes or not.
    const wakes: number[] = [];
    const sameProcess: number[] = [];
    let missed = 0;
    for (let round = 0; round < 2 * WAKE_ROUNDS && running(); round += 1) {
      const across = round % 2 === 0;
      const parkedOn = started[Math.floor(round / 2) % started.length];
      const pushedThrough = across ? started[(Math.floor(round / 2) + 1) % started.length] : parkedOn;
      const queue = `wake-${round}`;
      const poll: Promise<Timed> = send(
        parkedOn.base,
        tenant,
        'GET',
        `/api/v1/pop/queue/${queue}?wait=true&timeout=30000`,
      );
      await sleep(300);
      const pushed = await send(pushedThrough.base, tenant, 'POST', '/api/v1/push', {
        items: [{ queue, payload: { round } }],
      });
      const woken = await poll;
      if (woken.status === 200 && pushed.status === 201) (across ? wakes : sameProcess).push(woken.at - pushed.at);
      else missed += 1;
    }
    await loops;
    // Connections go back to the server before anything else runs.
    await Promise.allSettled(started.map((broker) => broker.stop()));
    sampling = false;
    await sampler;
    // Stopped by the guard: the shared server was full, whoever filled it; judged only when it was not.
    const met = peak > maxConnections ? false : !guarded && !refused && started.length === BROKERS ? true : undefined;
    return {
      outcomes: [
        {
          target: `${BROKERS} broker processes on one PostgreSQL under load stay within its ${maxConnections} connections`,
          measured: refused
            ? `${refused} (stopped so that the shared server refuses no one); peak ${peak}`
            : guarded
              ? `stopped by the guard: the server reached ${serverPeak} of ${maxConnections} connections with ${started.length} brokers up, ${peak} of them this database's`
              : `peak ${peak} connections of the ${BROKERS} brokers (server ${serverPeak} of ${maxConnections}, other clients included)`,
          met,
        },
        {
          target: 'cross-process wakeups ≤ 100 ms',
          measured: `${ms(p99(wakes))} p99, ${ms(p50(wakes))} p50 over ${wakes.length} wakes${missed ? `, ${missed} missed` : ''}; the same process's own wakes, interleaved: ${ms(p99(sameProcess))} p99, ${ms(p50(sameProcess))} p50 over ${sameProcess.length}`,
          met: wakes.length > 0 && missed === 0 && p99(wakes) <= 100,
        },
      ],
      curves: [],
      notes: [
        `brokers: default pool settings (DB_POOL_SIZE, DB_CONNECTION_BUDGET where the broker has it); a broker is started after 2 s of load on those before it; 2 push/pop/ack loops per process for ${LOAD_MS / 1000} s, ${WAKE_ROUNDS} wakes of a poll parked on one process by a push through the next, interleaved with as many by a push through the same process${errors.size ? `; errors: ${[...errors].map(([k, v]) => `${k} ×${v}`).join(', ')}` : ''}.`,
      ],
    };
  } finally {
    await Promise.allSettled(started.map((broker) => broker.stop()));
    await monitor.end();
    await dropDatabase(database);
  }
}

/** Two push → pop → ack loops per broker for `forMs`, or until `going` says stop. */
async function load(
  brokers: Broker[],
  tenant: string,
  going: () => boolean,
  forMs: number,
  error: (status: string) => void,
): Promise<void> {
  const until = performance.now() + forMs;
  await Promise.all(
    brokers.flatMap((broker, index) =>
      [0, 1].map(async (loop) => {
        const queue = `load-${index}-${loop}`;
        while (going() && performance.now() < until) {
          const pushed = await send(broker.base, tenant, 'POST', '/api/v1/push', {
            items: [{ queue, payload: { index } }],
          });
          if (pushed.status !== 201) error(`push ${pushed.status}`);
          const popped = await send<Popped>(broker.base, tenant, 'GET', `/api/v1/pop/queue/${queue}?wait=false`);
          if (popped.status === 200) await ackAll(broker.base, tenant, popped.body);
          else error(`pop ${popped.status}`);
        }
      }),
    ),
  );
}
