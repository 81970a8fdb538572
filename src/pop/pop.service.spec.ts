import { Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config';
import { Statement } from '../database/statement';
import { OpenTransaction } from '../database/transaction-runner';
import type { Session } from '../database/database';
import { UnitOfWork } from '../database/unit-of-work';
import { PayloadCipher } from '../encryption/payload-cipher';
import type { HistoryRecorder } from '../history/history-recorder';
import type { TenantQuotas } from '../limits/tenant-quotas';
import type { MaintenanceService } from '../maintenance/maintenance.service';
import type { MetricsService } from '../metrics/metrics.service';
import type { LeaseExpiryService } from '../wakeup/lease-expiry.service';
import type { ParkedPolls, QueueWork, Redelivery } from '../wakeup/parked-polls';
import type { Writes } from '../wakeup/writes';
import type { PopOptions } from './pop-query.pipe';
import { ClaimedRow, ClaimRequest, PopRepository, PopTarget } from './pop.repository';
import { PopService } from './pop.service';
import { HandedOutLeases } from '../ack/handed-out-leases';

/** A statement whose answer the test gives, whatever rows it gets. */
const answering = <T>(answer: () => T): Statement<T> => ({ text: '', values: [], parse: answer });

const QUEUE_ID = '0198f2c1-0000-7000-8000-00000000000a';
const P1 = '0198f2c1-0000-7000-8000-000000000001';
const P2 = '0198f2c1-0000-7000-8000-000000000002';

const OPTIONS: PopOptions = {
  batch: 10,
  partitions: 2,
  wait: false,
  timeoutMs: 0,
  leaseSeconds: undefined,
  consumerGroup: 'workers',
  subscriptionMode: 'all',
  subscriptionFrom: undefined,
  autoAck: false,
};

const TARGET: PopTarget = {
  queueId: QUEUE_ID,
  leaseTime: 30,
  delayedProcessing: 0,
  windowBuffer: 0,
  retryDelayMs: 0,
  partitionId: null,
  groupExists: true,
  backfilling: false,
  hasCursor: false,
};

function row(partitionId: string, partition: string, seq: number, overrides: Partial<ClaimedRow> = {}): ClaimedRow {
  return {
    id: `0198f2c1-0000-7000-8000-0000000001${String(seq).padStart(2, '0')}`,
    transaction_id: `m${seq}`,
    trace_id: null,
    payload: `{"n":${seq}}`,
    key_id: null,
    producer_sub: null,
    created_at: '2026-12-01T10:00:00.000000Z',
    partition_id: partitionId,
    partition,
    delivery_attempt: 1,
    lease_lost: false,
    lease_epoch: '3',
    seq: String(seq),
    after_offset: '0',
    through_offset: '10',
    ...overrides,
  };
}

interface World {
  target?: PopTarget;
  /** The claim's rows, as the database answers them. */
  claimed?: ClaimedRow[];
  maxTotalSeconds?: number;
  /** The client hangs up while the claim runs. */
  hangUpDuringClaim?: boolean;
}

function harness(world: World = {}) {
  const calls = {
    claims: [] as ClaimRequest[],
    groups: [] as Array<{ consumerGroup: string; newOnly: boolean }>,
    admitted: [] as Array<{ kind: string; created: number }>,
    backfills: 0,
    released: [] as string[],
    redelivered: [] as Redelivery[],
    leased: [] as Array<{ partitions: QueueWork; leaseMs: number }>,
    counted: [] as Array<{ metric: string; value: number }>,
    history: [] as Array<{ kind: string; messages: number; oldest?: string }>,
    clockRead: 0,
    /** Statements run before the claim's round trip: a pop that claims on what it saw sends none. */
    reads: 0,
    commits: 0,
    /** The names of the statements each unit committed with, the fake look at the queue as `look`. */
    committed: [] as string[][],
  };
  const signal = { aborted: false, addEventListener: () => undefined, removeEventListener: () => undefined };
  const transaction: OpenTransaction = {
    rows: async () => {
      calls.reads += 1;
      return [];
    },
    rowsTogether: async (statements) => statements.map(() => []),
    // The claim, last; before it, on a target seen before, the fresh look at it, whose answer the fake target gives.
    commitWith: async (statements) => {
      calls.commits += 1;
      calls.committed.push(statements.map((statement) => statement.name ?? 'look'));
      if (world.hangUpDuringClaim) signal.aborted = true;
      return statements.map((_statement, index) => (index === statements.length - 1 ? (world.claimed ?? []) : []));
    },
  };
  const writes = {
    run: async (tenantId: string, work: (unit: UnitOfWork) => Promise<unknown>) => {
      const unit = new UnitOfWork(tenantId, {} as Session, transaction);
      const result = await work(unit);
      calls.redelivered.push(...unit.redelivered);
      unit.runEffects(new Logger('test'));
      return result;
    },
  } as unknown as Writes;
  const pops = new PopRepository(new PayloadCipher({ encryptionKeys: [] } as unknown as AppConfig));
  const claim = pops.claim.bind(pops);
  Object.assign(pops, {
    target: () => answering(() => ('target' in world ? world.target : TARGET)),
    ensureGroup: async (
      _unit: UnitOfWork,
      _tenantId: string,
      _queueId: string,
      consumerGroup: string,
      startAt: { newOnly: boolean },
    ) => {
      calls.groups.push({ consumerGroup, newOnly: startAt.newOnly });
      return true;
    },
    backfill: () =>
      answering(() => {
        calls.backfills += 1;
        return { created: 1, done: true };
      }),
    ensureCursor: () => answering(() => undefined),
    databaseNow: () =>
      answering(() => {
        calls.clockRead += 1;
        return '2026-12-01T10:00:00.000000Z';
      }),
    nextDueInMs: () => answering(() => undefined),
    release: (_tenantId: string, leaseId: string) =>
      answering(() => {
        calls.released.push(leaseId);
        return new Map([['a', 1]]);
      }),
    claim: (tenantId: string, request: ClaimRequest) => {
      calls.claims.push(request);
      return claim(tenantId, request);
    },
  });
  const counter = (metric: string) => ({
    inc: (_labels: unknown, value = 1) => void calls.counted.push({ metric, value }),
  });
  const metrics = {
    poppedMessages: counter('popped'),
    leasesLost: counter('leasesLost'),
    redeliveredMessages: counter('redelivered'),
    pops: counter('pops'),
    queue: (_tenantId: string, queue: string) => ({ queue }),
  } as unknown as MetricsService;
  const expiries = {
    leased: (_tenantId: string, _queue: string, _group: string, partitions: QueueWork, leaseMs: number) =>
      void calls.leased.push({ partitions, leaseMs }),
  } as unknown as LeaseExpiryService;
  const quotas = {
    admit: async (_tenantId: string, kind: string, created: number) => void calls.admitted.push({ kind, created }),
  } as unknown as TenantQuotas;
  const history = {
    popped: (_tenantId: string, _queue: string, messages: number, oldest: string) =>
      void calls.history.push({ kind: 'popped', messages, oldest }),
    acked: (_tenantId: string, _queue: string, messages: number) =>
      void calls.history.push({ kind: 'acked', messages }),
  } as unknown as HistoryRecorder;
  const config = {
    limits: { responseMaxBytes: 1_048_576 },
    leaseMaxTotalSeconds: world.maxTotalSeconds,
    database: { poolSize: 4 },
  } as unknown as AppConfig;
  const service = new PopService(
    { popsArePaused: () => false } as unknown as MaintenanceService,
    writes,
    pops,
    {} as ParkedPolls,
    expiries,
    metrics,
    quotas,
    history,
    new HandedOutLeases(),
    config,
  );
  const pop = async (options: Partial<PopOptions> = {}, partition?: string) => {
    const answer = await service.pop('t', 'jobs', partition, { ...OPTIONS, ...options }, signal);
    return answer === undefined ? undefined : (JSON.parse(answer.text) as Record<string, any>);
  };
  return { service, calls, pop };
}

describe('PopService.pop', () => {
  it('answers the claimed messages in one envelope, with the lease, the group and one entry per partition claimed', async () => {
    const { pop, calls } = harness({
      claimed: [row(P1, 'a', 1), row(P1, 'a', 2), row(P2, 'b', 7, { lease_epoch: '9', delivery_attempt: 2 })],
    });

    const answer = await pop();

    const leaseId = calls.claims[0].leaseId;
    expect(answer).toMatchObject({
      success: true,
      queue: 'jobs',
      partition: 'a',
      partitionId: P1,
      leaseId,
      consumerGroup: 'workers',
      partitionsClaimed: 2,
      claimedPartitions: [
        { partitionId: P1, partition: 'a', leaseEpoch: 3, messages: 2 },
        { partitionId: P2, partition: 'b', leaseEpoch: 9, messages: 1 },
      ],
    });
    expect(answer!.messages).toHaveLength(3);
    expect(answer!.messages[2]).toEqual({
      id: row(P2, 'b', 7).id,
      transactionId: 'm7',
      traceId: null,
      data: { n: 7 },
      producerSub: null,
      createdAt: '2026-12-01T10:00:00.000000Z',
      partitionId: P2,
      partition: 'b',
      leaseId,
      consumerGroup: 'workers',
      deliveryAttempt: 2,
      leaseEpoch: 9,
    });
  });

  it('sets an expiry timer per partition for a leased claim, and none with autoAck, whose messages carry no lease', async () => {
    const leased = harness({ claimed: [row(P1, 'a', 1), row(P1, 'a', 2), row(P2, 'b', 1)] });
    await leased.pop();
    expect(leased.calls.leased).toEqual([
      {
        partitions: new Map([
          ['a', 2],
          ['b', 1],
        ]),
        leaseMs: 30_000,
      },
    ]);

    const acked = harness({ claimed: [row(P1, 'a', 1)] });
    const answer = await acked.pop({ autoAck: true });
    expect(answer!.leaseId).toBeNull();
    expect(answer!.messages[0].leaseId).toBeNull();
    expect(acked.calls.leased).toEqual([]);
  });

  it('answers nothing for a queue that does not exist, creating and claiming nothing', async () => {
    const { pop, calls } = harness({ target: undefined });

    expect(await pop()).toBeUndefined();
    expect(calls.claims).toEqual([]);
    expect(calls.groups).toEqual([]);
    expect(calls.clockRead).toBe(0);
  });

  it('fixes a "new" subscription at the database clock when its queue does not exist yet', async () => {
    const { pop, calls } = harness({ target: undefined });

    expect(await pop({ subscriptionMode: 'new' })).toBeUndefined();
    expect(calls.clockRead).toBe(1);
  });

  it('creates a missing group, counted against the quota, and looks through the partitions for its cursors', async () => {
    const { pop, calls } = harness({ target: { ...TARGET, groupExists: false } });

    expect(await pop({ subscriptionMode: 'new' })).toBeUndefined();
    expect(calls.groups).toEqual([{ consumerGroup: 'workers', newOnly: true }]);
    expect(calls.admitted).toEqual([{ kind: 'consumerGroups', created: 1 }]);
    expect(calls.backfills).toBe(1);
    expect(calls.claims).toHaveLength(1);
  });

  it("leases for the queue's leaseTime, the pop's leaseSeconds instead, and never past LEASE_MAX_TOTAL_SECONDS", async () => {
    const queueTime = harness();
    await queueTime.pop();
    const asked = harness();
    await asked.pop({ leaseSeconds: 90 });
    const capped = harness({ maxTotalSeconds: 60 });
    await capped.pop({ leaseSeconds: 90 });

    expect(queueTime.calls.claims[0].leaseSeconds).toBe(30);
    expect(asked.calls.claims[0].leaseSeconds).toBe(90);
    expect(capped.calls.claims[0]).toMatchObject({ leaseSeconds: 60, maxTotalSeconds: 60 });
  });

  it('gives a leased batch back when its client went during the claim, and answers nothing', async () => {
    const { pop, calls } = harness({ claimed: [row(P1, 'a', 1)], hangUpDuringClaim: true });
    const warned = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);

    expect(await pop()).toBeUndefined();
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls.released).toEqual([calls.claims[0].leaseId]);
    expect(calls.redelivered).toEqual([{ queue: 'jobs', consumerGroup: 'workers', partitions: new Map([['a', 1]]) }]);
    expect(calls.leased).toEqual([]);
    expect(warned).toHaveBeenCalledWith(expect.stringContaining('was released'));
    warned.mockRestore();
  });

  it('counts popped messages, and leases lost with the messages they hand out again, once committed', async () => {
    const { pop, calls } = harness({
      claimed: [row(P1, 'a', 1, { lease_lost: true }), row(P1, 'a', 2, { lease_lost: true }), row(P2, 'b', 1)],
    });

    await pop();

    expect(calls.counted).toEqual([
      { metric: 'popped', value: 3 },
      { metric: 'leasesLost', value: 1 },
      { metric: 'redelivered', value: 2 },
      { metric: 'pops', value: 1 },
    ]);
  });

  it("records the pop in the queue's history with its oldest message, and an autoAck pop as acked too", async () => {
    const leased = harness({
      claimed: [row(P1, 'a', 1, { created_at: '2026-12-01T10:00:02.000000Z' }), row(P2, 'b', 1)],
    });
    await leased.pop();
    expect(leased.calls.history).toEqual([{ kind: 'popped', messages: 2, oldest: '2026-12-01T10:00:00.000000Z' }]);

    const acked = harness({ claimed: [row(P1, 'a', 1)] });
    await acked.pop({ autoAck: true });
    expect(acked.calls.history).toEqual([
      { kind: 'popped', messages: 1, oldest: '2026-12-01T10:00:00.000000Z' },
      { kind: 'acked', messages: 1 },
    ]);
  });

  describe('on a queue it saw at its last pop', () => {
    /** Pops once per target given, the world's target set to it first; the reads and commits each pop made. */
    async function popsOn(world: World, targets: PopTarget[]) {
      const { pop, calls } = harness(world);
      const trips: Array<{ reads: number; commits: number }> = [];
      for (const target of targets) {
        world.target = target;
        const before = { reads: calls.reads, commits: calls.commits };
        await pop();
        trips.push({ reads: calls.reads - before.reads, commits: calls.commits - before.commits });
      }
      return { calls, trips, leases: calls.claims.map((claim) => claim.leaseSeconds) };
    }

    it('claims on what it saw, its look at the queue sent ahead of the claim, the claim with COMMIT', async () => {
      const { calls, trips, leases } = await popsOn({ claimed: [row(P1, 'a', 1)] }, [TARGET, TARGET, TARGET]);

      expect(trips).toEqual([
        { reads: 1, commits: 1 },
        { reads: 0, commits: 1 },
        { reads: 0, commits: 1 },
      ]);
      expect(leases).toEqual([30, 30, 30]);
      // The claim last: its locks are taken at the end of the round trip, after the look.
      expect(calls.committed).toEqual([['leasehold_claim'], ['look', 'leasehold_claim'], ['look', 'leasehold_claim']]);
    });

    it('looks first and claims again when the queue changed and its claim on what it saw took nothing', async () => {
      const { trips, leases } = await popsOn({ claimed: [] }, [TARGET, { ...TARGET, leaseTime: 90 }]);

      expect(trips[1]).toEqual({ reads: 1, commits: 2 });
      expect(leases).toEqual([30, 30, 90]);
    });

    it('keeps what it claimed beside a look that found the queue changed, and claims on the change next', async () => {
      const changed = { ...TARGET, leaseTime: 90 };
      const { trips, leases } = await popsOn({ claimed: [row(P1, 'a', 1)] }, [TARGET, changed, changed]);

      expect(trips.map(({ reads }) => reads)).toEqual([1, 0, 0]);
      expect(leases).toEqual([30, 30, 90]);
    });

    it.each([
      ['a group that does not exist yet', { groupExists: false }, undefined],
      ['a group still looking through its partitions', { backfilling: true }, undefined],
      ['a partition without its cursor yet', { partitionId: P1, hasCursor: false }, 'a'],
    ])('looks first at every pop on %s', async (_case, shape, partition) => {
      const world: World = { claimed: [] };
      const { pop, calls } = harness(world);
      world.target = { ...TARGET, ...shape };

      for (let round = 0; round < 3; round += 1) {
        await pop({}, partition);
      }

      expect(calls.commits).toBe(3);
      expect(calls.reads).toBeGreaterThanOrEqual(3);
      expect(calls.claims).toHaveLength(3);
    });
  });
});
