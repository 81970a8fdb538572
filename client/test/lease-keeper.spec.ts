import {
  LeaseholdClient,
  LeaseKeeper,
  LeaseLostError,
  type ExtendResult,
  type LeaseExtender,
  type RequestOptions,
} from '../src';
import { FakeBroker } from './fake-broker';
import {
  aborted,
  deferred,
  delay,
  extendAnswer,
  waitFor,
} from './test-helpers';

const LEASE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

describe('LeaseKeeper on a fake clock', () => {
  let calls: { seconds: number; at: number; signal?: AbortSignal }[];
  let answer: () => Promise<ExtendResult>;
  let keeper: LeaseKeeper | undefined;
  const extender: LeaseExtender = {
    extend(
      _leaseId: string,
      seconds: number,
      options?: RequestOptions,
    ): Promise<ExtendResult> {
      calls.push({ seconds, at: performance.now(), signal: options?.signal });
      return answer();
    },
  };

  function keep(leaseSeconds: number, acquiredAt?: number): LeaseKeeper {
    keeper = new LeaseKeeper(extender, {
      leaseId: LEASE_ID,
      leaseSeconds,
      acquiredAt,
    });
    return keeper;
  }

  beforeEach(() => {
    jest.useFakeTimers();
    calls = [];
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 1));
  });

  afterEach(() => {
    keeper?.stop();
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it.each([
    [0, 10_000],
    [0.5, 9_000],
    [0.99, 8_020],
  ])(
    'with a jitter draw of %p renews a 30 s lease after %p ms: at a third of it, or up to a fifth of that earlier',
    async (draw, expectedMs) => {
      jest.spyOn(Math, 'random').mockReturnValue(draw);
      keep(30);

      await jest.advanceTimersByTimeAsync(Math.ceil(expectedMs) - 1);
      expect(calls).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(calls).toHaveLength(1);
    },
  );

  it('keeps renewing on that cadence and asks for the full duration every time', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    const start = performance.now();
    keep(30);

    await jest.advanceTimersByTimeAsync(100_000);

    expect(
      calls.map((call) => [call.seconds, Math.round(call.at - start)]),
    ).toEqual([
      [30, 10_000],
      [30, 20_000],
      [30, 30_000],
      [30, 40_000],
      [30, 50_000],
      [30, 60_000],
      [30, 70_000],
      [30, 80_000],
      [30, 90_000],
      [30, 100_000],
    ]);
    expect(keeper?.signal.aborted).toBe(false);
  });

  it('draws a fresh jitter for every renewal, so workers started together drift apart', async () => {
    jest
      .spyOn(Math, 'random')
      .mockReturnValueOnce(0)
      .mockReturnValueOnce(1)
      .mockReturnValue(0.5);
    const start = performance.now();
    keep(30);

    await jest.advanceTimersByTimeAsync(27_000);

    expect(calls.map((call) => Math.round(call.at - start))).toEqual([
      10_000, 18_000, 27_000,
    ]);
  });

  it('ignores the wall clock: a jump of an hour either way neither loses nor delays the lease', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    keep(30);

    jest.setSystemTime(Date.now() + 3_600_000);
    await jest.advanceTimersByTimeAsync(10_000);
    jest.setSystemTime(Date.now() - 7_200_000);
    await jest.advanceTimersByTimeAsync(10_000);

    expect(calls).toHaveLength(2);
    expect(keeper?.signal.aborted).toBe(false);
  });

  it('aborts with LeaseLostError the moment a renewal answers renewed 0, and clears its timers', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 0));
    const signal = keep(30).signal;

    await jest.advanceTimersByTimeAsync(10_000);

    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LeaseLostError);
    expect(signal.reason).toMatchObject({
      leaseId: LEASE_ID,
      kind: 'not-renewed',
    });
    expect(keeper?.lost).toBe(signal.reason);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('aborts at the deadline counted from acquiredAt when every renewal fails, with the last failure as cause', async () => {
    const failure = new TypeError('fetch failed');
    answer = () => Promise.reject(failure);
    const signal = keep(30, performance.now() - 5_000).signal;

    await jest.advanceTimersByTimeAsync(24_999);
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(signal.reason).toMatchObject({
      kind: 'deadline-passed',
      cause: failure,
    });
    expect(calls.length).toBeGreaterThan(3);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('moves the deadline to a full duration after the send of the last successful renewal', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    const signal = keep(30).signal;
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(1);
    answer = () => Promise.reject(new Error('broker unreachable'));

    await jest.advanceTimersByTimeAsync(29_999);
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(signal.reason).toMatchObject({ kind: 'deadline-passed' });
  });

  it('gives each attempt a signal that stop() aborts', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answer = () => new Promise(() => undefined);
    keep(30);
    await jest.advanceTimersByTimeAsync(10_000);

    keeper?.stop();

    expect(calls[0].signal?.aborted).toBe(true);
  });

  it('stop() clears every timer and leaves the signal unaborted', async () => {
    keep(30);
    expect(jest.getTimerCount()).toBe(2);

    keeper?.stop();

    expect(jest.getTimerCount()).toBe(0);
    expect(keeper?.signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(120_000);
    expect(calls).toHaveLength(0);
  });

  it.each([
    [
      'a successful renewal',
      (pending: ReturnType<typeof deferred<ExtendResult>>) =>
        pending.resolve(extendAnswer(LEASE_ID, 1)),
    ],
    [
      'a renewed 0',
      (pending: ReturnType<typeof deferred<ExtendResult>>) =>
        pending.resolve(extendAnswer(LEASE_ID, 0)),
    ],
    [
      'a failure',
      (pending: ReturnType<typeof deferred<ExtendResult>>) =>
        pending.reject(new Error('late')),
    ],
  ])(
    'schedules nothing when %s arrives after stop()',
    async (_label, settle) => {
      jest.spyOn(Math, 'random').mockReturnValue(0);
      const pending = deferred<ExtendResult>();
      answer = () => pending.promise;
      const signal = keep(30).signal;
      await jest.advanceTimersByTimeAsync(10_000);
      expect(calls).toHaveLength(1);

      keeper?.stop();
      settle(pending);
      await jest.advanceTimersByTimeAsync(120_000);

      expect(calls).toHaveLength(1);
      expect(jest.getTimerCount()).toBe(0);
      expect(signal.aborted).toBe(false);
    },
  );

  it.each([
    [{ leaseSeconds: 1.5 }],
    [{ leaseSeconds: 0 }],
    [{ leaseSeconds: 3_000_000 }],
    [{ leaseSeconds: 30, renewFraction: 1 }],
    [{ leaseSeconds: 30, jitter: 1 }],
  ])('refuses %p at construction', (options) => {
    expect(
      () => new LeaseKeeper(extender, { leaseId: LEASE_ID, ...options }),
    ).toThrow(RangeError);
  });
});

describe('LeaseKeeper against a broker over HTTP', () => {
  let broker: FakeBroker;
  let client: LeaseholdClient;
  let keeper: LeaseKeeper | undefined;

  beforeEach(async () => {
    broker = await FakeBroker.start();
    client = new LeaseholdClient({ baseUrl: broker.baseUrl });
  });

  afterEach(async () => {
    keeper?.stop();
    keeper = undefined;
    await broker.close();
  });

  async function popAndKeep(
    leaseSeconds: number,
  ): Promise<{ leaseId: string; transactionId: string; partitionId: string }> {
    await client.push([{ queue: 'jobs', payload: { slow: true } }]);
    const acquiredAt = performance.now();
    const pop = await client.pop('jobs', { leaseSeconds });
    if (pop === null) {
      throw new Error('expected a batch');
    }
    keeper = new LeaseKeeper(client, {
      leaseId: pop.leaseId,
      leaseSeconds,
      acquiredAt,
    });
    const [message] = pop.messages;
    return {
      leaseId: pop.leaseId,
      transactionId: message.transactionId,
      partitionId: message.partitionId,
    };
  }

  it('holds a 1 s lease for 3 s, renewing every 267-333 ms and asking for 1 s each time', async () => {
    const lease = await popAndKeep(1);

    await delay(3_000);

    const renewals = broker.requestsTo('extend');
    const gaps = renewals
      .slice(1)
      .map((request, i) => request.at - renewals[i].at);
    expect(renewals.length).toBeGreaterThanOrEqual(5);
    expect(
      renewals.every(
        (request) => (request.body as { seconds: number }).seconds === 1,
      ),
    ).toBe(true);
    // Timers never fire early, so the lower bound is exact; the upper one allows for a busy machine.
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(260);
    expect(Math.max(...gaps)).toBeLessThan(700);
    expect(keeper?.signal.aborted).toBe(false);
    await expect(client.pop('jobs')).resolves.toBeNull();
    await expect(
      client.ack({ ...lease, status: 'completed' }),
    ).resolves.toMatchObject({ success: true });
  });

  it('aborts with LeaseLostError not-renewed at the first renewal after the lease was released', async () => {
    const lease = await popAndKeep(3);
    const signal = keeper?.signal as AbortSignal;
    await client.ack({ ...lease, status: 'completed' });
    const releasedAt = performance.now();

    const reason = await aborted(signal);

    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason).toMatchObject({
      kind: 'not-renewed',
      leaseId: lease.leaseId,
    });
    expect(performance.now() - releasedAt).toBeLessThan(1_500);
    expect(broker.requestsTo('extend')).toHaveLength(1);
  });

  it('aborts with LeaseLostError deadline-passed when the broker becomes unreachable', async () => {
    const started = performance.now();
    await popAndKeep(1);
    const signal = keeper?.signal as AbortSignal;
    await broker.close();

    const reason = await aborted(signal);
    const elapsed = performance.now() - started;

    expect(reason).toMatchObject({
      name: 'LeaseLostError',
      kind: 'deadline-passed',
    });
    // fetch's own error, from Node's realm rather than the test's, so matched by shape.
    expect((reason as LeaseLostError).cause).toMatchObject({
      name: 'TypeError',
      message: 'fetch failed',
    });
    expect(elapsed).toBeGreaterThanOrEqual(990);
    expect(elapsed).toBeLessThan(1_500);
  });

  it('sends no renewal after stop(), not even when the answer to one in flight arrives later', async () => {
    broker.delay('extend', 300);
    await popAndKeep(1);
    await waitFor(() => broker.requestsTo('extend').length === 1);

    keeper?.stop();
    await delay(1_200);

    expect(broker.requestsTo('extend')).toHaveLength(1);
    expect(keeper?.signal.aborted).toBe(false);
  });
});
