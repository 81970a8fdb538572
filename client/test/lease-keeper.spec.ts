import {
  LeaseholdClient,
  LeaseKeeper,
  LeaseLostError,
  type ExtendResult,
  type LeaseEndingNotice,
  type LeaseExtender,
  type LeaseKeeperOptions,
  type RequestOptions,
} from '../src';
import { FakeBroker } from './fake-broker';
import { aborted, deferred, delay, extendAnswer, waitFor } from './test-helpers';

const LEASE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

describe('LeaseKeeper on a fake clock', () => {
  let calls: { seconds: number; at: number; signal?: AbortSignal }[];
  let answer: () => Promise<ExtendResult>;
  let keeper: LeaseKeeper | undefined;
  const extender: LeaseExtender = {
    extend(_leaseId: string, seconds: number, options?: RequestOptions): Promise<ExtendResult> {
      calls.push({ seconds, at: performance.now(), signal: options?.signal });
      return answer();
    },
  };

  function keep(leaseSeconds: number, acquiredAt?: number, options: Partial<LeaseKeeperOptions> = {}): LeaseKeeper {
    keeper = new LeaseKeeper(extender, {
      leaseId: LEASE_ID,
      leaseSeconds,
      acquiredAt,
      ...options,
    });
    return keeper;
  }

  /** Answers the renewals in turn with these hints, then with none. */
  function answerWith(...hints: Parameters<typeof extendAnswer>[2][]): void {
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 1, hints.shift()));
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

    expect(calls.map((call) => [call.seconds, Math.round(call.at - start)])).toEqual([
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
    jest.spyOn(Math, 'random').mockReturnValueOnce(0).mockReturnValueOnce(1).mockReturnValue(0.5);
    const start = performance.now();
    keep(30);

    await jest.advanceTimersByTimeAsync(27_000);

    expect(calls.map((call) => Math.round(call.at - start))).toEqual([10_000, 18_000, 27_000]);
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

  it.each([
    [4, 4_000],
    [0.5, 500],
    [0, 50],
    [1e9, 20_000],
  ])(
    'follows a Renew-After of %p s with the next renewal %p ms after the answer: no sooner than 50 ms, no later than a full attempt before the deadline',
    async (renewAfterSeconds, expectedMs) => {
      jest.spyOn(Math, 'random').mockReturnValue(0);
      answerWith({ renewAfterSeconds });
      const start = performance.now();
      keep(30);

      await jest.advanceTimersByTimeAsync(10_000 + expectedMs - 1);
      expect(calls).toHaveLength(1);
      await jest.advanceTimersByTimeAsync(1);
      expect(calls).toHaveLength(2);
      // The second answer has no hint: back to a third of the lease.
      await jest.advanceTimersByTimeAsync(10_000);

      expect(calls.map((call) => call.at - start)).toEqual([10_000, 10_000 + expectedMs, 20_000 + expectedMs]);
    },
  );

  it('never lets the lease lapse when every answer hints at a renewal far past its end', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 1, { renewAfterSeconds: 3_600 }));
    const start = performance.now();
    const signal = keep(30).signal;

    await jest.advanceTimersByTimeAsync(300_000);

    // Each renewal leaves 30 s; the next comes with a third of it still to go.
    expect(calls.slice(0, 4).map((call) => call.at - start)).toEqual([10_000, 30_000, 50_000, 70_000]);
    expect(calls).toHaveLength(15);
    expect(signal.aborted).toBe(false);
  });

  it.each([Number.NaN, -1, Infinity, undefined])(
    'keeps its own schedule when an extender hands it a Renew-After of %p',
    async (renewAfterSeconds) => {
      jest.spyOn(Math, 'random').mockReturnValue(0);
      answerWith({ renewAfterSeconds: renewAfterSeconds as number });
      const start = performance.now();
      keep(30);

      await jest.advanceTimersByTimeAsync(30_000);

      expect(calls.map((call) => call.at - start)).toEqual([10_000, 20_000, 30_000]);
    },
  );

  it('at the ceiling stops renewing, tells onEnding once with the time left, and aborts with ceiling-reached at the hard end', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    const notices: LeaseEndingNotice[] = [];
    // At 10 s the hard end is 40 s away; at 25 s it is 25 s away, and renewals stop.
    answerWith({ renewAfterSeconds: 15, deadlineSeconds: 40 }, { renewAfterSeconds: null, deadlineSeconds: 25 });
    const start = performance.now();
    const signal = keep(30, undefined, {
      onEnding: (notice) => notices.push(notice),
    }).signal;

    await jest.advanceTimersByTimeAsync(24_999);
    expect(keeper?.ending).toBeNull();
    await jest.advanceTimersByTimeAsync(1);
    expect(notices).toEqual([{ leaseId: LEASE_ID, remainingMs: 25_000, endsAt: start + 50_000, reason: 'ceiling' }]);
    expect(keeper?.ending).toEqual(notices[0]);
    // 25 s + 30 s would be 55 s: the hard end at 50 s comes first.
    await jest.advanceTimersByTimeAsync(24_999);
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(signal.reason).toBeInstanceOf(LeaseLostError);
    expect(signal.reason).toMatchObject({
      kind: 'ceiling-reached',
      message: `lease ${LEASE_ID} is lost: it reached the broker's ceiling on total lease length`,
    });
    expect(calls.map((call) => call.at - start)).toEqual([10_000, 25_000]);
    expect(notices).toHaveLength(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('takes a Deadline-After no longer than the lease as the ceiling, even with a Renew-After', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answerWith({ renewAfterSeconds: 5, deadlineSeconds: 30 });
    const signal = keep(30).signal;

    await jest.advanceTimersByTimeAsync(39_999);
    expect(calls).toHaveLength(1);
    expect(keeper?.ending).toMatchObject({ remainingMs: 30_000 });
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(signal.reason).toMatchObject({ kind: 'ceiling-reached' });
  });

  it('pulls the deadline in to the hard end when the ceiling made the lease shorter than leaseSeconds', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    // The pop was capped to 22 s: at 10 s only 12 s are left, not the 20 s assumed.
    answerWith({ renewAfterSeconds: null, deadlineSeconds: 12 });
    const notices: LeaseEndingNotice[] = [];
    const signal = keep(30, undefined, {
      onEnding: (notice) => notices.push(notice),
    }).signal;

    await jest.advanceTimersByTimeAsync(21_999);
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(notices).toEqual([expect.objectContaining({ remainingMs: 12_000 })]);
    expect(signal.reason).toMatchObject({ kind: 'ceiling-reached' });
  });

  it('keeps its deadline and ending when onEnding throws', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answerWith({ renewAfterSeconds: null, deadlineSeconds: 20 });
    const onEnding = jest.fn(() => {
      throw new Error('logger down');
    });
    const signal = keep(30, undefined, { onEnding }).signal;

    await jest.advanceTimersByTimeAsync(29_999);
    expect(onEnding).toHaveBeenCalledTimes(1);
    expect(keeper?.ending).toMatchObject({ remainingMs: 20_000 });
    expect(signal.aborted).toBe(false);
    await jest.advanceTimersByTimeAsync(1);

    expect(signal.reason).toMatchObject({ kind: 'ceiling-reached' });
    expect(calls).toHaveLength(1);
  });

  it.each([
    ['expired' as const, ': the broker renewed nothing (expired)'],
    ['unknown' as const, ': the broker renewed nothing (unknown)'],
    [null, ': the broker renewed nothing'],
  ])('carries a Lease-Status of %p on a not-renewed loss', async (leaseStatus, ending) => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 0, { leaseStatus }));
    const signal = keep(30).signal;

    await jest.advanceTimersByTimeAsync(10_000);

    const reason = signal.reason as LeaseLostError;
    expect(reason.kind).toBe('not-renewed');
    expect(reason.leaseStatus).toBe(leaseStatus ?? undefined);
    expect(reason.message).toBe(`lease ${LEASE_ID} is lost${ending}`);
  });

  it('keeps a lease whose rows were busy, keeps its deadline, and renews again after the hint', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    const start = performance.now();
    const answers = [
      extendAnswer(LEASE_ID, 0, { busy: true, renewAfterSeconds: 0.2 }),
      extendAnswer(LEASE_ID, 1, { busy: true, renewAfterSeconds: 0.2 }),
    ];
    answer = () => Promise.resolve(answers.shift() ?? extendAnswer(LEASE_ID, 1));
    const signal = keep(30).signal;

    await jest.advanceTimersByTimeAsync(10_400);
    expect(signal.aborted).toBe(false);
    expect(calls.map((call) => Math.round(call.at - start))).toEqual([10_000, 10_200, 10_400]);
    // Only the last answer renewed every row: the lease now runs 30 s from that renewal.
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls.map((call) => Math.round(call.at - start))).toEqual([10_000, 10_200, 10_400, 20_400]);
    expect(signal.aborted).toBe(false);
  });

  it('loses a lease that stays busy until its deadline, as one whose renewals fail', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    answer = () => Promise.resolve(extendAnswer(LEASE_ID, 0, { busy: true, renewAfterSeconds: 0.25 }));
    const signal = keep(30).signal;

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
      (pending: ReturnType<typeof deferred<ExtendResult>>) => pending.resolve(extendAnswer(LEASE_ID, 1)),
    ],
    ['a renewed 0', (pending: ReturnType<typeof deferred<ExtendResult>>) => pending.resolve(extendAnswer(LEASE_ID, 0))],
    ['a failure', (pending: ReturnType<typeof deferred<ExtendResult>>) => pending.reject(new Error('late'))],
  ])('schedules nothing when %s arrives after stop()', async (_label, settle) => {
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
  });

  it.each([
    [{ leaseSeconds: 1.5 }],
    [{ leaseSeconds: 0 }],
    [{ leaseSeconds: 3_000_000 }],
    [{ leaseSeconds: 30, renewFraction: 1 }],
    [{ leaseSeconds: 30, jitter: 1 }],
  ])('refuses %p at construction', (options) => {
    expect(() => new LeaseKeeper(extender, { leaseId: LEASE_ID, ...options })).toThrow(RangeError);
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
    options: Partial<LeaseKeeperOptions> = {},
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
      ...options,
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
    const gaps = renewals.slice(1).map((request, i) => request.at - renewals[i].at);
    expect(renewals.length).toBeGreaterThanOrEqual(5);
    expect(renewals.every((request) => (request.body as { seconds: number }).seconds === 1)).toBe(true);
    // Timers never fire early, so the lower bound is exact; the upper one allows for a busy machine.
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(260);
    expect(Math.max(...gaps)).toBeLessThan(700);
    expect(keeper?.signal.aborted).toBe(false);
    await expect(client.pop('jobs')).resolves.toBeNull();
    await expect(client.ack({ ...lease, status: 'completed' })).resolves.toMatchObject({ success: true });
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

  it("follows the broker's hints to its ceiling, tells onEnding, then aborts with ceiling-reached no later than the broker's hard end", async () => {
    broker.renewalHints = true;
    broker.leaseMaxTotalSeconds = 2;
    const notices: { notice: LeaseEndingNotice; at: number }[] = [];
    await popAndKeep(1, {
      onEnding: (notice) => notices.push({ notice, at: performance.now() }),
    });
    const signal = keeper?.signal as AbortSignal;

    const reason = await aborted(signal);

    // The fake broker shares this clock; its hard end is 2 s after it claimed the batch.
    const hardEnd = broker.leaseHardEnd(notices[0].notice.leaseId);
    expect(reason).toMatchObject({ kind: 'ceiling-reached' });
    expect(notices).toHaveLength(1);
    expect(notices[0].notice.remainingMs).toBeGreaterThan(0);
    expect(notices[0].notice.remainingMs).toBeLessThanOrEqual(1_000);
    // The local deadline, to the broker's rounding of the header to a millisecond; remainingMs
    // was counted to it no later than onEnding ran.
    const { endsAt, remainingMs } = notices[0].notice;
    expect(endsAt - hardEnd).toBeLessThan(1);
    expect(endsAt - remainingMs).toBeLessThanOrEqual(notices[0].at);
    expect(performance.now() - hardEnd).toBeGreaterThan(-500);
    expect(broker.requestsTo('extend').length).toBeGreaterThanOrEqual(3);
  });

  it('carries Lease-Status expired when the broker says the lease ran out', async () => {
    broker.renewalHints = true;
    await popAndKeep(3);
    const signal = keeper?.signal as AbortSignal;
    broker.advanceClock(3_500);

    const reason = await aborted(signal);

    expect(reason).toMatchObject({
      kind: 'not-renewed',
      leaseStatus: 'expired',
      message: expect.stringMatching(/renewed nothing \(expired\)$/),
    });
  });

  it('ignores a malformed Renew-After and keeps its own schedule', async () => {
    // Read loosely, this would be 10 ms.
    broker.extendHeaders = { 'Leasehold-Renew-After': '0.01s' };
    await popAndKeep(1);

    await delay(1_200);

    const renewals = broker.requestsTo('extend');
    const gaps = renewals.slice(1).map((request, i) => request.at - renewals[i].at);
    expect(renewals.length).toBeGreaterThanOrEqual(3);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(260);
    expect(keeper?.signal.aborted).toBe(false);
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
