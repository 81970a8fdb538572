import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { openSession } from '../support/pg-session';
import { newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { waitFor, within } from '../support/wait';
import { BrokerProcess } from './support/broker-process';
import { consumedAll, orphanedTransactions } from './support/ledger';
import { Call, Workload } from './support/workload';

jest.setTimeout(180_000);

const SHUTDOWN_TIMEOUT_MS = 10_000;
/** A parked poll must answer at once on SIGTERM, not at its timeout. */
const POLL_TIMEOUT_MS = 5_000;

(onEmbeddedDatabase ? describe.skip : describe)('two broker processes on one database, one of them stopped', () => {
  const applicationName = `leasehold-${randomUUID().slice(0, 8)}`;
  const brokers: BrokerProcess[] = [];
  let running: Workload | undefined;
  let db: Client;

  beforeEach(async () => {
    const env = {
      DATABASE_URL: `${process.env.DATABASE_URL}?application_name=${applicationName}`,
      TENANT_HEADER,
      SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      // How long an idle kept-alive connection stays open after SIGTERM for a request already on its way: the
      // default second is shorter than a client of this workload lags behind on a machine two CPU hogs keep busy,
      // and a request it then writes on the closing connection meets "other side closed", as documented.
      SHUTDOWN_IDLE_GRACE_MS: '4000',
      DB_POOL_SIZE: '4',
    };
    brokers.push(...(await Promise.all([BrokerProcess.start(env), BrokerProcess.start(env)])));
    db = await openSession();
  });

  afterEach(async () => {
    await running?.stop();
    running = undefined;
    await Promise.all(brokers.map((broker) => broker.stop()));
    brokers.length = 0;
    await db.end();
  });

  function startWorkload(tenant: string, queue: string): Workload {
    const workload = new Workload({
      brokers: brokers.map((broker) => broker.url),
      tenantHeader: TENANT_HEADER,
      tenant,
      queue,
      partitions: 4,
      messagesPerPartition: 40,
      consumers: 4,
      leaseSeconds: 3,
      pushIntervalMs: 40,
      popTimeoutMs: POLL_TIMEOUT_MS,
      extend: true,
    });
    running = workload;
    workload.start();
    return workload;
  }

  async function expectEverythingConsumedOnce(workload: Workload, tenant: string, queue: string): Promise<void> {
    await within(workload.producersFinished(), 'the producers finish', 60_000);
    await waitFor(() => consumedAll(db, tenant, queue), 'every message consumed', 60_000);
    await workload.stop();
    expect(await workload.ledger.problems(db, tenant, queue)).toEqual([]);
    expect(await orphanedTransactions(db, applicationName)).toBe(0);
  }

  it('SIGTERM under steady load with kept-alive clients: takes nothing new, answers parked polls 503 at once, finishes what is in flight, exits 0; the other broker carries on and nothing is lost', async () => {
    const [draining] = brokers;
    const tenant = newTenant();
    const queue = 'rolling';
    const workload = startWorkload(tenant, queue);
    await waitFor(() => workload.acksSucceeded >= 10, 'the workload gets going');
    // Polls parked on the draining broker, on a queue that stays empty: each in a group of its own, whose
    // row appears with its first pop, so the test knows the poll reached the broker and is parked.
    const idleGroups = ['idle-0', 'idle-1', 'idle-2'];
    const parked = idleGroups.map((group) => parkedPoll(draining.url, tenant, group));
    await waitFor(async () => {
      const { rows } = await db.query(
        'SELECT count(*)::int AS n FROM consumer_groups WHERE tenant_id = $1 AND name LIKE $2',
        [tenant, 'idle-%'],
      );
      return rows[0].n === idleGroups.length;
    }, 'the idle polls are parked');

    const listenerClosed = draining.waitForLine(/Listener closed/).then(() => performance.now());
    const signalledAt = performance.now();
    draining.kill('SIGTERM');
    await within(draining.waitForLine(/SIGTERM: shutting down/), 'the broker starts draining');
    const drainingAt = performance.now();
    const exit = await within(draining.exited, 'the broker exits', SHUTDOWN_TIMEOUT_MS + 5_000);

    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
    expect(draining.lines.some((line) => /Drained in \d+ ms/.test(line))).toBe(true);
    // Every line is JSON; pino's level 50 and up are errors.
    expect(
      draining.lines.filter((line) => /cutting/.test(line) || (JSON.parse(line) as { level: number }).level >= 50),
    ).toEqual([]);

    // Nothing sent to it once it was draining was served, on any connection.
    const afterDrain = workload.calls.filter((call) => call.broker === 0 && call.sentAt > drainingAt);
    expect(afterDrain.filter((call) => call.status !== undefined && call.status < 500)).toEqual([]);
    expect(afterDrain.filter((call) => call.status !== undefined && call.status !== 503)).toEqual([]);
    // Every call it had taken a connection for was answered: one that failed found the listener closed, refused, or
    // reset by the kernel as the listener closed: a new connection, sent on before the broker said it had closed the
    // listener (docs/failures.md#shutdown). None on a connection that had carried an answer, none sent later.
    const listenerClosedSeenAt = await within(listenerClosed, 'the listener closes');
    const unanswered = workload.calls.filter(
      (call) => call.broker === 0 && call.answeredAt >= signalledAt && call.status === undefined,
    );
    const refused = /ECONNREFUSED|connect ECONNRESET/;
    const resetUnread = (call: Call): boolean =>
      call.reusedConnection !== true && call.sentAt <= listenerClosedSeenAt && /ECONNRESET/.test(call.error!);
    expect(unanswered.filter((call) => !refused.test(call.error!) && !resetUnread(call))).toEqual([]);
    // Parked polls answered 503 at once, with Connection: close, instead of at their timeout.
    for (const poll of await Promise.all(parked)) {
      expect({ ...poll, answeredAt: undefined }).toEqual({
        answeredAt: undefined,
        status: 503,
        body: { error: 'shutting down' },
        connection: 'close',
        retryAfter: '1',
      });
      expect(poll.answeredAt! - signalledAt).toBeLessThan(POLL_TIMEOUT_MS / 2);
    }
    // Clients moved on instead of polling the dying broker again and again.
    const pollsAfterDrain = afterDrain.filter((call) => call.route === 'pop');
    expect(pollsAfterDrain.length).toBeLessThanOrEqual(8);

    await expectEverythingConsumedOnce(workload, tenant, queue);
  });

  it('kill -9 under load: its clients move to the other broker, its leases lapse and redeliver, nothing is lost or doubled', async () => {
    const [killed] = brokers;
    const tenant = newTenant();
    const queue = 'killed';
    const workload = startWorkload(tenant, queue);
    await waitFor(() => workload.acksSucceeded >= 10, 'the workload gets going');

    killed.kill('SIGKILL');
    const exit = await within(killed.exited, 'the broker dies');
    expect(exit.signal).toBe('SIGKILL');

    await expectEverythingConsumedOnce(workload, tenant, queue);
    expect(workload.calls.some((call) => call.broker === 1 && call.status === 201)).toBe(true);
  });
});

interface PollAnswer {
  status: number;
  body: unknown;
  connection: string | null;
  retryAfter: string | null;
  answeredAt?: number;
}

/** A long poll on an empty queue (created by the pop itself, as configure would), in a group of its own. */
async function parkedPoll(base: string, tenant: string, consumerGroup: string): Promise<PollAnswer> {
  await fetch(`${base}/api/v1/configure`, {
    method: 'POST',
    headers: { [TENANT_HEADER]: tenant, 'content-type': 'application/json' },
    body: JSON.stringify({ queue: 'idle' }),
  });
  const query = new URLSearchParams({ wait: 'true', timeout: String(POLL_TIMEOUT_MS), consumerGroup });
  const response = await fetch(`${base}/api/v1/pop/queue/idle?${query.toString()}`, {
    headers: { [TENANT_HEADER]: tenant },
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? JSON.parse(text) : undefined,
    connection: response.headers.get('connection'),
    retryAfter: response.headers.get('retry-after'),
    answeredAt: performance.now(),
  };
}
