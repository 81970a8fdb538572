import { Statement } from '../database/statement';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { EXPIRY_SWEEP_MS, LeaseExpiryService } from './lease-expiry.service';
import { EndingLease, WakeupRepository } from './wakeup.repository';
import { ParkedPolls, Redelivery } from './parked-polls';

interface Harness {
  expiry: LeaseExpiryService;
  waiting: Set<string>;
  woken: Array<{ tenantId: string; redeliveries: Redelivery[] }>;
  ending: jest.Mock<Promise<EndingLease[]>, unknown[]>;
  drain: () => void;
}

function harness(): Harness {
  const waiting = new Set<string>();
  const woken: Harness['woken'] = [];
  const polls = {
    isWaiting: (tenantId: string, queue: string, group: string) => waiting.has(`${tenantId}/${queue}/${group}`),
    waitingGroups: () =>
      [...waiting].map((key) => {
        const [tenantId, queue, consumerGroup] = key.split('/');
        return { tenantId, queue, consumerGroup };
      }),
    redelivered: (tenantId: string, redeliveries: Redelivery[]) => woken.push({ tenantId, redeliveries }),
  } as unknown as ParkedPolls;
  const ending = jest.fn<Promise<EndingLease[]>, unknown[]>().mockResolvedValue([]);
  // `ending` answers the sweep's statement, given the groups it names.
  const transactions = {
    runOne: (_tenant: unknown, statement: Statement<EndingLease[]>) => {
      const [tenants, queues, groups] = statement.values as string[][];
      return ending(
        tenants.map((tenantId, index) => ({ tenantId, queue: queues[index], consumerGroup: groups[index] })),
      );
    },
  } as unknown as TransactionRunner;
  let onDrain: () => void = () => undefined;
  const drainService = { onDrain: (listener: () => void) => (onDrain = listener) } as unknown as DrainService;
  const expiry = new LeaseExpiryService(polls, transactions, new WakeupRepository(), drainService);
  return { expiry, waiting, woken, ending, drain: () => onDrain() };
}

const wokenFor = (woken: Harness['woken']) =>
  woken
    .map(({ tenantId, redeliveries }) =>
      redeliveries.map(
        (r) => `${tenantId}/${r.queue}/${r.consumerGroup}/${[...r.partitions].map(([p, n]) => `${p}:${n}`).join(',')}`,
      ),
    )
    .flat();

describe('LeaseExpiryService', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it("wakes a waiting group's polls when a lease handed out here ends, not before", () => {
    const { expiry, waiting, woken } = harness();
    waiting.add('t/jobs/g');

    expiry.leased('t', 'jobs', 'g', new Map([['p', 3]]), 2_000);

    jest.advanceTimersByTime(1_999);
    expect(woken).toEqual([]);
    jest.advanceTimersByTime(10);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/p:3']);
    jest.advanceTimersByTime(60_000);
    expect(woken).toHaveLength(1);
  });

  it('fires many planned ends in order of their instants, each once, a re-planned one at its new instant only', () => {
    const { expiry, waiting, woken } = harness();
    waiting.add('t/jobs/g');
    for (let index = 0; index < 1_000; index += 1) {
      expiry.leased('t', 'jobs', 'g', new Map([[`p${index}`, 1]]), 5_000 - index);
    }
    // A renewal seen by the sweep moves p0's end later: it fires then, not at its first plan.
    expiry.leased('t', 'jobs', 'g', new Map([['p0', 1]]), 8_000);

    jest.advanceTimersByTime(4_105);
    expect(wokenFor(woken)).toEqual(Array.from({ length: 100 }, (_, index) => `t/jobs/g/p${999 - index}:1`));
    jest.advanceTimersByTime(1_000);
    expect(woken).toHaveLength(999);
    jest.advanceTimersByTime(3_000);
    expect(wokenFor(woken).at(-1)).toBe('t/jobs/g/p0:1');
    expect(woken).toHaveLength(1_000);
  });

  it('plans nothing for a group with no poll parked here: the sweep finds it if one parks later', () => {
    const { expiry, woken } = harness();

    expiry.leased('t', 'jobs', 'g', new Map([['p', 1]]), 1_000);

    jest.advanceTimersByTime(5_000);
    expect(woken).toEqual([]);
  });

  it('keeps one timer at the earliest end, and fires each lease at its own', () => {
    const { expiry, waiting, woken } = harness();
    waiting.add('t/jobs/g');

    expiry.leased('t', 'jobs', 'g', new Map([['late', 1]]), 5_000);
    expiry.leased('t', 'jobs', 'g', new Map([['soon', 1]]), 1_000);

    jest.advanceTimersByTime(1_010);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/soon:1']);
    jest.advanceTimersByTime(4_000);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/soon:1', 't/jobs/g/late:1']);
  });

  it('a later claim of the same partition replaces its planned end', () => {
    const { expiry, waiting, woken } = harness();
    waiting.add('t/jobs/g');

    expiry.leased('t', 'jobs', 'g', new Map([['p', 1]]), 1_000);
    expiry.leased('t', 'jobs', 'g', new Map([['p', 2]]), 3_000);

    jest.advanceTimersByTime(2_000);
    expect(woken).toEqual([]);
    jest.advanceTimersByTime(1_010);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/p:2']);
  });

  it('sweeps only while polls are parked, asks for their groups, and wakes ended leases at once and ending ones at their end', async () => {
    const { expiry, waiting, woken, ending } = harness();
    expiry.onApplicationBootstrap();

    await jest.advanceTimersByTimeAsync(EXPIRY_SWEEP_MS * 3);
    expect(ending).not.toHaveBeenCalled();

    waiting.add('t/jobs/g');
    ending.mockResolvedValueOnce([
      { tenantId: 't', queue: 'jobs', consumerGroup: 'g', partition: 'ended', messages: 2, dueInMs: 0 },
      { tenantId: 't', queue: 'jobs', consumerGroup: 'g', partition: 'ending', messages: 1, dueInMs: 700 },
    ]);
    await jest.advanceTimersByTimeAsync(EXPIRY_SWEEP_MS);

    expect(ending).toHaveBeenCalledTimes(1);
    expect(ending.mock.calls[0][0]).toEqual([{ tenantId: 't', queue: 'jobs', consumerGroup: 'g' }]);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/ended:2']);
    await jest.advanceTimersByTimeAsync(710);
    expect(wokenFor(woken)).toEqual(['t/jobs/g/ended:2', 't/jobs/g/ending:1']);
    expiry.onApplicationShutdown();
  });

  it('runs one sweep at a time, and a failing sweep neither throws nor stops the next', async () => {
    const { expiry, waiting, ending } = harness();
    waiting.add('t/jobs/g');
    let finish: (leases: EndingLease[]) => void = () => undefined;
    ending.mockImplementationOnce(() => new Promise((resolve) => (finish = resolve)));
    ending.mockRejectedValueOnce(new Error('connection lost'));
    expiry.onApplicationBootstrap();

    await jest.advanceTimersByTimeAsync(EXPIRY_SWEEP_MS * 4);
    expect(ending).toHaveBeenCalledTimes(1);
    finish([]);
    await jest.advanceTimersByTimeAsync(EXPIRY_SWEEP_MS);
    expect(ending).toHaveBeenCalledTimes(2);
    await jest.advanceTimersByTimeAsync(EXPIRY_SWEEP_MS);
    expect(ending).toHaveBeenCalledTimes(3);
    expiry.onApplicationShutdown();
  });

  it('stops sweeping and forgets its plans once the broker drains', async () => {
    const { expiry, waiting, woken, ending, drain } = harness();
    waiting.add('t/jobs/g');
    expiry.onApplicationBootstrap();
    expiry.leased('t', 'jobs', 'g', new Map([['p', 1]]), 1_000);

    drain();

    await jest.advanceTimersByTimeAsync(10_000);
    expect(woken).toEqual([]);
    expect(ending).not.toHaveBeenCalled();
  });
});
