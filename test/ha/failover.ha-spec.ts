import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { BrokerProcess } from '../faults/support/broker-process';
import { consumedAll } from '../faults/support/ledger';
import { Call, Workload } from '../faults/support/workload';
import { TENANT_HEADER } from '../support/test-app';
import { waitFor, within } from '../support/wait';
import { BROKER_PORTS, haStack, HAPROXY_URL, Member, Replication } from './ha-stack';

/**
 * Two brokers behind HAProxy on a Patroni pair, under a workload that keeps
 * an exactly-once ledger: the primary's postmaster is killed, Patroni
 * promotes the standby, the old primary rejoins as a standby, and then the
 * same again the other way. `npm run test:ha`; figures go to docs/deployment.md.
 */
jest.setTimeout(600_000);

const DATABASE = 'leasehold_ha';
const POP_TIMEOUT_MS = 2_000;
// The broker's defaults: DB_ACQUIRE_TIMEOUT_MS 2 s, DB_STATEMENT_TIMEOUT_MS 5 s plus 1 s for the unit of work.
const REQUEST_BOUND_MS = 2_000 + 5_000 + 1_000;
// A long poll may park for its timeout, then claim within the request bound.
const POLL_BOUND_MS = POP_TIMEOUT_MS + REQUEST_BOUND_MS;
/** What the client's own measurement adds to a bound on a loaded machine. */
const CLIENT_SLACK_MS = 2_000;

interface Failover {
  from: string;
  to: string;
  killedAt: number;
  firstPushAfterMs: number;
  promotedAfterMs: number;
  rejoinedAfterMs: number;
  /** First and last probe after the kill that answered 503. */
  unreadyMs?: [number, number];
}

interface Readiness {
  at: number;
  broker: number;
  status: number;
}

describe.each<[Replication]>([['sync'], ['async']])(
  'a failover of PostgreSQL under load (%s replication)',
  (replication) => {
    const applicationName = `leasehold-ha-${randomUUID().slice(0, 8)}`;
    const tenant = randomUUID();
    const queue = 'failover';
    const brokers: BrokerProcess[] = [];
    const readiness: Readiness[] = [];
    const failovers: Failover[] = [];
    let workload: Workload | undefined;
    let watching = true;
    let watcher: Promise<void> = Promise.resolve();

    beforeAll(async () => {
      await haStack.stop().catch(() => undefined);
      await haStack.start(replication);
      const admin = new Client({ connectionString: `${HAPROXY_URL}/postgres` });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${DATABASE}`);
      await admin.end();
      const env = {
        DATABASE_URL: `${HAPROXY_URL}/${DATABASE}?application_name=${applicationName}`,
        TENANT_HEADER,
        DB_POOL_SIZE: '4',
        LOG_LEVEL: 'warn',
        RETENTION_INTERVAL_MS: '0',
        // The two brokers count each other through the failovers, as a deployment's would.
        BROKER_HEARTBEAT_MS: '1000',
      };
      // Ports given, not chosen: at LOG_LEVEL=warn a broker does not log where it listens.
      brokers.push(
        ...(await Promise.all(
          BROKER_PORTS[replication].map((port) => BrokerProcess.start({ ...env, PORT: String(port) })),
        )),
      );
      watcher = watchReadiness();
    }, 400_000);

    afterAll(async () => {
      watching = false;
      await workload?.stop();
      await watcher;
      await Promise.all(brokers.map((broker) => broker.stop()));
      await haStack.stop();
      report();
    }, 180_000);

    async function watchReadiness(): Promise<void> {
      while (watching) {
        await Promise.all(
          brokers.map(async (broker, index) => {
            const status = await fetch(`${broker.url}/health/ready`, {
              signal: AbortSignal.timeout(REQUEST_BOUND_MS + CLIENT_SLACK_MS),
            }).then(
              (response) => response.status,
              () => 0,
            );
            readiness.push({ at: performance.now(), broker: index, status });
          }),
        );
        // A switch can leave readiness down for under a second: look often.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }

    async function failOver(): Promise<Failover> {
      const leader = await haStack.leader();
      if (!leader) throw new Error('no leader to fail over from');
      const before = workload!.acksSucceeded;
      await waitFor(() => workload!.acksSucceeded >= before + 40, 'the workload moves on before the kill', 60_000);
      const killedAt = performance.now();
      haStack.killPostmaster(leader);
      let promoted: Member | undefined;
      await waitFor(
        async () => {
          promoted = await haStack.leader();
          return promoted !== undefined && promoted.name !== leader.name;
        },
        'the standby is promoted',
        60_000,
      );
      const promotedAfterMs = performance.now() - killedAt;
      await waitFor(
        async () => {
          const pushed = firstPushAfter(workload!.calls, killedAt);
          return pushed !== undefined;
        },
        'a push succeeds after the kill',
        60_000,
      );
      const firstPushAfterMs = firstPushAfter(workload!.calls, killedAt)! - killedAt;
      // A diverged old primary first starts as a replica on the old timeline, then stops for pg_rewind: it has
      // rejoined only once it follows the new leader's timeline, caught up, for a few checks in a row.
      const standbyRole = replication === 'sync' ? 'sync_standby' : 'replica';
      let steady = 0;
      await waitFor(
        async () => {
          const members = await haStack.members();
          const current = members.find((member) => member.role === 'leader');
          const old = members.find((member) => member.name === leader.name);
          const following =
            current !== undefined &&
            old?.role === standbyRole &&
            old.state === 'running' &&
            old.timeline === current.timeline &&
            typeof old.lag === 'number' &&
            old.lag < 1_048_576;
          steady = following ? steady + 1 : 0;
          if (steady < 3) await new Promise((resolve) => setTimeout(resolve, 500));
          return steady >= 3;
        },
        'the old primary rejoins as a standby',
        120_000,
      );
      const failover = {
        from: leader.name,
        to: promoted!.name,
        killedAt,
        firstPushAfterMs,
        promotedAfterMs,
        rejoinedAfterMs: performance.now() - killedAt,
      };
      failovers.push(failover);
      return failover;
    }

    it('loses nothing acknowledged, keeps every bound, and reports unready only during the switch', async () => {
      workload = new Workload({
        brokers: brokers.map((broker) => broker.url),
        tenantHeader: TENANT_HEADER,
        tenant,
        queue,
        partitions: 4,
        messagesPerPartition: 500,
        consumers: 4,
        leaseSeconds: 4,
        batch: 5,
        pushIntervalMs: 20,
        popTimeoutMs: POP_TIMEOUT_MS,
        requestTimeoutMs: 30_000,
        extend: true,
        nackEvery: 25,
      });
      workload.start();

      const first = await failOver();
      const second = await failOver();
      expect(second.from).toBe(first.to);
      expect(second.to).toBe(first.from);

      await within(workload.producersFinished(), 'the producers finish', 300_000);
      const db = new Client({ connectionString: `${HAPROXY_URL}/${DATABASE}` });
      await db.connect();
      try {
        await waitFor(() => consumedAll(db, tenant, queue), 'every message consumed', 120_000);
        await workload.stop();
        const problems = await workload.ledger.problems(db, tenant, queue);
        if (replication === 'sync') {
          expect(problems).toEqual([]);
        } else {
          // Asynchronous replication may lose what the old primary committed last: say what, and nothing else.
          lost = problems;
          expect(problems.filter((problem) => !LOST_WRITE.test(problem))).toEqual([]);
        }
      } finally {
        await db.end();
      }

      const slow = workload.calls.filter(
        (call) =>
          call.answeredAt - call.sentAt > (call.route === 'pop' ? POLL_BOUND_MS : REQUEST_BOUND_MS) + CLIENT_SLACK_MS,
      );
      expect(slow.map(describeCall)).toEqual([]);
      expect(workload.calls.filter((call) => call.error !== undefined).map(describeCall)).toEqual([]);
      const statuses = new Set(workload.calls.map((call) => call.status));
      expect([...statuses].filter((status) => ![200, 201, 204, 500].includes(status!))).toEqual([]);

      for (const [index, failover] of failovers.entries()) {
        // Up to the next kill: the second failover's outage is not the first one's.
        const until = failovers[index + 1]?.killedAt ?? failover.killedAt + 30_000;
        const unready = readiness.filter(
          (probe) => probe.at > failover.killedAt && probe.at < until && probe.status !== 200,
        );
        expect(unready.length).toBeGreaterThan(0);
        expect(unready.filter((probe) => probe.status !== 503)).toEqual([]);
        failover.unreadyMs = [unready[0].at - failover.killedAt, unready[unready.length - 1].at - failover.killedAt];
      }
      await waitFor(
        async () =>
          (await Promise.all(brokers.map((broker) => fetch(`${broker.url}/health/ready`).then((r) => r.status)))).every(
            (status) => status === 200,
          ),
        'both brokers ready again',
        30_000,
      );
    });

    let lost: string[] = [];

    function report(): void {
      const lines = failovers.map(
        (failover, index) =>
          `failover ${index + 1} (${failover.from} -> ${failover.to}): promoted after ${ms(failover.promotedAfterMs)}, ` +
          `first push answered 201 after ${ms(failover.firstPushAfterMs)}, old primary back as standby after ` +
          `${ms(failover.rejoinedAfterMs)}; readiness 503 from ${failover.unreadyMs ? failover.unreadyMs.map(ms).join(' to ') : '(none seen)'}`,
      );
      const failures = workload?.calls.filter((call) => call.status === 500).length ?? 0;
      lines.push(`${failures} answers 500 (pool or database timeout) of ${workload?.calls.length ?? 0} calls`);
      if (replication === 'async')
        lines.push(`lost with asynchronous replication: ${lost.length ? lost.join('; ') : 'nothing'}`);
      console.log(`HA ${replication}:\n  ${lines.join('\n  ')}`);
    }
  },
);

/** What asynchronous replication can lose: writes the old primary acknowledged and never shipped. */
const LOST_WRITE =
  /\(201\) stored 0 times|\(201\) never delivered|stored out of the order it sent them in|delivered but not stored|delivered again after its ack succeeded|acked \d+ times|cursor at|last_offset/;

function firstPushAfter(calls: Call[], at: number): number | undefined {
  return calls.find((call) => call.route === 'push' && call.status === 201 && call.sentAt > at)?.answeredAt;
}

function describeCall(call: Call): string {
  return `${call.route} to broker ${call.broker}: ${call.status ?? call.error} after ${ms(call.answeredAt - call.sentAt)}`;
}

function ms(value: number): string {
  return `${Math.round(value)} ms`;
}
