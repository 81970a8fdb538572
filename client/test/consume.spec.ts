import {
  consume,
  LeaseholdClient,
  LeaseholdError,
  LeaseLostError,
  type Acknowledgment,
  type ConsumeHandler,
  type ConsumeOptions,
  type ConsumeStage,
  type LeaseEndingNotice,
  type Message,
} from '../src';
import { FakeBroker, type RecordedRequest } from './fake-broker';
import { aborted, delay, waitFor } from './test-helpers';

describe('consume', () => {
  let broker: FakeBroker;
  let client: LeaseholdClient;
  let stop: AbortController;
  let running: Promise<void> | undefined;
  let errors: [unknown, ConsumeStage][];
  let lost: [LeaseLostError, Message[]][];

  beforeEach(async () => {
    broker = await FakeBroker.start();
    client = new LeaseholdClient({ baseUrl: broker.baseUrl });
    stop = new AbortController();
    running = undefined;
    errors = [];
    lost = [];
  });

  afterEach(async () => {
    stop.abort();
    await running?.catch(() => undefined);
    await broker.close();
  });

  function start<T>(handler: ConsumeHandler<T>, options: Partial<ConsumeOptions<T>> = {}): Promise<void> {
    running = consume<T>('jobs', handler, {
      client,
      signal: stop.signal,
      waitTimeoutMs: 2_000,
      onError: (error, stage) => errors.push([error, stage]),
      onLeaseLost: (error, messages) => lost.push([error, messages]),
      ...options,
    });
    return running;
  }

  function acknowledgments(request: RecordedRequest): Acknowledgment[] {
    return (request.body as { acknowledgments: Acknowledgment[] }).acknowledgments;
  }

  it('long-polls with wait=true and its own 30 s lease when none is given', async () => {
    void start(() => undefined);

    await waitFor(() => broker.requestsTo('pop').length > 0);

    const [pop] = broker.requestsTo('pop');
    expect(pop.query.get('wait')).toBe('true');
    expect(pop.query.get('leaseSeconds')).toBe('30');
    expect(pop.query.get('timeout')).toBe('2000');
  });

  it('acks the whole batch with its lease id when the handler returns', async () => {
    await client.push([
      { queue: 'jobs', payload: 'a' },
      { queue: 'jobs', payload: 'b' },
    ]);
    const seen: { data: string[]; leaseId: string }[] = [];
    running = client.consume<string>(
      'jobs',
      (messages, { leaseId }) => {
        seen.push({ data: messages.map((message) => message.data), leaseId });
      },
      { signal: stop.signal, waitTimeoutMs: 2_000, batch: 10 },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 1);

    expect(seen).toEqual([{ data: ['a', 'b'], leaseId: expect.any(String) }]);
    const acks = acknowledgments(broker.requestsTo('ack-batch')[0]);
    expect(acks).toHaveLength(2);
    expect(acks.every((ack) => ack.leaseId === seen[0].leaseId && ack.status === 'completed')).toBe(true);
    await expect(client.pop('jobs')).resolves.toBeNull();
  });

  it('lets the handler trace a message under its own group, and a trace that fails neither throws nor fails the batch', async () => {
    await client.push([{ queue: 'jobs', payload: 'traced' }]);
    broker.failNext('traces', 503, '{"error":"shutting down"}');
    const ids: Array<string | null> = [];
    void start<string>(
      async (messages, context) => {
        ids.push(await context.trace(messages[0], { step: 1 }, { eventType: 'processing', traceNames: 'order-1' }));
        ids.push(await context.trace(messages[0], { step: 2 }));
      },
      { consumerGroup: 'billing' },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 1);

    expect(ids).toEqual([null, expect.any(String)]);
    expect(errors.map(([, stage]) => stage)).toEqual(['trace']);
    const traces = broker.requestsTo('traces').map((request) => request.body);
    expect(traces[1]).toEqual({
      transactionId: expect.any(String),
      partitionId: expect.any(String),
      consumerGroup: 'billing',
      data: { step: 2 },
    });
    expect(traces[0]).toMatchObject({ eventType: 'processing', traceNames: 'order-1', data: { step: 1 } });
    expect(acknowledgments(broker.requestsTo('ack-batch')[0])[0].status).toBe('completed');
  });

  it('keeps the lease of a handler that works 2.5 times longer than it, so nobody else gets the batch', async () => {
    await client.push([{ queue: 'jobs', payload: 'slow' }]);
    const competitor = new LeaseholdClient({ baseUrl: broker.baseUrl });
    const competitorPops: unknown[] = [];
    let calls = 0;
    void start(
      async () => {
        calls += 1;
        for (let i = 0; i < 5; i += 1) {
          await delay(500);
          competitorPops.push(await competitor.pop('jobs'));
        }
      },
      { leaseSeconds: 1 },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 1);

    expect(calls).toBe(1);
    expect(competitorPops).toEqual([null, null, null, null, null]);
    expect(broker.requestsTo('extend').length).toBeGreaterThanOrEqual(5);
    expect(lost).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('keeps a batch that arrived after the long poll waited longer than the lease', async () => {
    let handlerSignal: AbortSignal | undefined;
    void start(
      async (_messages, { signal }) => {
        handlerSignal = signal;
        await delay(1_200);
      },
      { leaseSeconds: 1, waitTimeoutMs: 5_000 },
    );
    await waitFor(() => broker.requestsTo('pop').length === 1);
    await delay(1_500);

    await client.push([{ queue: 'jobs', payload: 'worth the wait' }]);
    await waitFor(() => broker.requestsTo('ack-batch').length === 1);

    expect(handlerSignal?.aborted).toBe(false);
    expect(lost).toEqual([]);
    expect(acknowledgments(broker.requestsTo('ack-batch')[0])).toEqual([
      expect.objectContaining({ status: 'completed' }),
    ]);
  });

  it('nacks with status failed and the error text when the handler throws, and the batch comes back', async () => {
    await client.push([{ queue: 'jobs', payload: 'flaky' }]);
    const attempts: number[] = [];
    void start(async (messages) => {
      attempts.push(messages[0].deliveryAttempt);
      if (attempts.length === 1) {
        throw new Error('boom');
      }
    });

    await waitFor(() => broker.requestsTo('ack-batch').length === 2);

    const [nack, ack] = broker.requestsTo('ack-batch').map(acknowledgments);
    expect(nack).toEqual([
      expect.objectContaining({
        status: 'failed',
        error: 'boom',
        leaseId: expect.any(String),
      }),
    ]);
    expect(ack).toEqual([expect.objectContaining({ status: 'completed' })]);
    expect(attempts).toEqual([1, 2]);
    expect(errors).toEqual([[expect.objectContaining({ message: 'boom' }), 'handler']]);
  });

  it("sends each message's leaseEpoch on the nack and on the ack of its redelivery", async () => {
    await client.push([{ queue: 'jobs', payload: 'flaky' }]);
    const epochs: number[] = [];
    void start(async (messages) => {
      epochs.push(messages[0].leaseEpoch);
      if (epochs.length === 1) {
        throw new Error('boom');
      }
    });

    await waitFor(() => broker.requestsTo('ack-batch').length === 2);

    const [nack, ack] = broker.requestsTo('ack-batch').map(acknowledgments);
    // Each claim of the partition moves its epoch on.
    expect(epochs).toEqual([1, 2]);
    expect(nack).toEqual([expect.objectContaining({ status: 'failed', leaseEpoch: 1 })]);
    expect(ack).toEqual([expect.objectContaining({ status: 'completed', leaseEpoch: 2 })]);
    expect(errors).toEqual([[expect.objectContaining({ message: 'boom' }), 'handler']]);
  });

  it('sends no leaseEpoch to a broker whose messages carry none', async () => {
    broker.epochs = false;
    await client.push([{ queue: 'jobs', payload: 'flaky' }]);
    let calls = 0;
    void start(async () => {
      calls += 1;
      if (calls === 1) {
        throw new Error('boom');
      }
    });

    await waitFor(() => broker.requestsTo('ack-batch').length === 2);

    const sent = broker.requestsTo('ack-batch').flatMap(acknowledgments);
    expect(sent.map((entry) => entry.status)).toEqual(['failed', 'completed']);
    expect(sent.filter((entry) => 'leaseEpoch' in entry)).toEqual([]);
  });

  it("tells onLeaseEnding before the broker's ceiling ends the lease, then reports ceiling-reached through onLeaseLost and does not ack", async () => {
    broker.renewalHints = true;
    broker.leaseMaxTotalSeconds = 2;
    await client.push([{ queue: 'jobs', payload: 'long' }]);
    const endings: [LeaseEndingNotice, Message[]][] = [];
    const endingsAtAbort: number[] = [];
    const leases: string[] = [];
    void start(
      async (_messages, { signal, leaseId }) => {
        leases.push(leaseId);
        if (leases.length > 1) {
          return;
        }
        await aborted(signal);
        endingsAtAbort.push(endings.length);
      },
      {
        leaseSeconds: 1,
        waitTimeoutMs: 300,
        onLeaseEnding: (notice, messages) => endings.push([notice, messages]),
      },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 1);

    expect(endings).toEqual([
      [
        {
          leaseId: leases[0],
          remainingMs: expect.any(Number),
          endsAt: expect.any(Number),
          reason: 'ceiling',
        },
        [expect.objectContaining({ data: 'long', leaseEpoch: 1 })],
      ],
    ]);
    expect(endingsAtAbort).toEqual([1]);
    expect(lost).toEqual([
      [
        expect.objectContaining({
          kind: 'ceiling-reached',
          leaseId: leases[0],
        }),
        [expect.objectContaining({ data: 'long' })],
      ],
    ]);
    const [only] = broker.requestsTo('ack-batch').map(acknowledgments);
    expect(only).toEqual([
      expect.objectContaining({
        status: 'completed',
        leaseId: leases[1],
        leaseEpoch: 2,
      }),
    ]);
    expect(errors).toEqual([]);
  });

  it.each(['returns', 'throws'])(
    'when the lease is lost mid-work it aborts the signal, neither acks nor nacks when the handler %s, and reports onLeaseLost',
    async (ending) => {
      await client.push([{ queue: 'jobs', payload: 'contested' }]);
      const reasons: unknown[] = [];
      const leases: string[] = [];
      void start(
        async (_messages, { signal, leaseId }) => {
          leases.push(leaseId);
          if (leases.length > 1) {
            return;
          }
          // As if this worker froze past its lease: by the broker's clock the lease has expired.
          broker.advanceClock(3_000);
          reasons.push(await aborted(signal));
          if (ending === 'throws') {
            throw new Error('stopped on lease loss');
          }
        },
        { leaseSeconds: 2 },
      );

      await waitFor(() => broker.requestsTo('ack-batch').length === 1);

      expect(reasons).toEqual([expect.any(LeaseLostError)]);
      expect(reasons[0]).toMatchObject({
        kind: 'not-renewed',
        leaseId: leases[0],
      });
      expect(lost).toEqual([[reasons[0], [expect.objectContaining({ data: 'contested', deliveryAttempt: 1 })]]]);
      const [only] = broker.requestsTo('ack-batch').map(acknowledgments);
      expect(only).toEqual([expect.objectContaining({ status: 'completed', leaseId: leases[1] })]);
      expect(broker.requestsTo('ack')).toHaveLength(0);
      expect(errors).toEqual([]);
    },
  );

  it('reports an ack refused as "invalid or expired lease" through onLeaseLost', async () => {
    await client.push([{ queue: 'jobs', payload: 'late' }]);
    let calls = 0;
    void start(
      () => {
        calls += 1;
        if (calls === 1) {
          // The lease expires by the broker's clock after the handler is done, before the ack.
          broker.advanceClock(3_000);
        }
      },
      { leaseSeconds: 2 },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 2);

    expect(lost).toEqual([
      [expect.objectContaining({ kind: 'ack-rejected' }), [expect.objectContaining({ data: 'late' })]],
    ]);
    expect(calls).toBe(2);
    expect(errors).toEqual([]);
  });

  it('runs up to `concurrency` batches at once, each under its own lease', async () => {
    await client.push([
      { queue: 'jobs', partition: 'p1', payload: 1 },
      { queue: 'jobs', partition: 'p2', payload: 2 },
      { queue: 'jobs', partition: 'p3', payload: 3 },
    ]);
    let inFlight = 0;
    let peak = 0;
    const leases = new Set<string>();
    void start(
      async (_messages, { leaseId }) => {
        leases.add(leaseId);
        inFlight += 1;
        peak = Math.max(peak, inFlight);
        await delay(300);
        inFlight -= 1;
      },
      { concurrency: 2 },
    );

    await waitFor(() => broker.requestsTo('ack-batch').length === 3);

    expect(peak).toBe(2);
    expect(leases.size).toBe(3);
  });

  it("with onStop 'finish' lets the running handler finish and ack, then resolves", async () => {
    await client.push([{ queue: 'jobs', payload: 'last' }]);
    let handlerSignal: AbortSignal | undefined;
    let finished = false;
    const done = start(async (_messages, { signal }) => {
      handlerSignal = signal;
      await delay(400);
      finished = true;
    });
    await waitFor(() => handlerSignal !== undefined);

    stop.abort();
    await done;

    expect(finished).toBe(true);
    expect(handlerSignal?.aborted).toBe(false);
    expect(acknowledgments(broker.requestsTo('ack-batch')[0])).toEqual([
      expect.objectContaining({ status: 'completed' }),
    ]);
  });

  it("with onStop 'abandon' aborts the running handler, resolves at once, and neither acks nor nacks", async () => {
    await client.push([{ queue: 'jobs', payload: 'dropped' }]);
    let handlerSignal: AbortSignal | undefined;
    let handlerReturned = false;
    const done = start(
      async (_messages, { signal }) => {
        handlerSignal = signal;
        await aborted(signal);
        // Slow to wind down: consume must not wait for it.
        await delay(300);
        handlerReturned = true;
      },
      { onStop: 'abandon', leaseSeconds: 1 },
    );
    await waitFor(() => handlerSignal !== undefined);

    stop.abort(new Error('shutting down'));
    await done;
    const returnedBeforeStop = handlerReturned;
    const renewalsAtStop = broker.requestsTo('extend').length;
    await delay(700);

    expect(returnedBeforeStop).toBe(false);
    expect(handlerReturned).toBe(true);
    expect(handlerSignal?.reason).toEqual(new Error('shutting down'));
    expect(broker.requestsTo('ack-batch')).toHaveLength(0);
    expect(broker.requestsTo('extend')).toHaveLength(renewalsAtStop);
  });

  it('stops promptly while parked in a long poll', async () => {
    const done = start(() => undefined, { waitTimeoutMs: 20_000 });
    await waitFor(() => broker.requestsTo('pop').length === 1);

    const stopping = performance.now();
    stop.abort();
    await done;

    expect(performance.now() - stopping).toBeLessThan(500);
    expect(errors).toEqual([]);
  });

  it('resolves at once when its signal has already fired', async () => {
    stop.abort();

    await start(() => undefined);

    expect(broker.requestsTo('pop')).toHaveLength(0);
  });

  it('backs off between failing pops, doubling to a bound with jitter, and recovers', async () => {
    broker.failNext('pop', 500, JSON.stringify({ error: 'pool' }), 5);
    await client.push([{ queue: 'jobs', payload: 'after the outage' }]);
    const handled: string[] = [];
    void start<string>(
      (messages) => {
        handled.push(...messages.map((message) => message.data));
      },
      { backoffInitialMs: 100, backoffMaxMs: 300 },
    );

    await waitFor(() => handled.length === 1);

    const pops = broker.requestsTo('pop');
    const gaps = pops.slice(1, 6).map((request, i) => request.at - pops[i].at);
    expect(handled).toEqual(['after the outage']);
    expect(errors).toHaveLength(5);
    expect(
      errors.every(([error, stage]) => error instanceof LeaseholdError && error.status === 500 && stage === 'pop'),
    ).toBe(true);
    // Each wait is drawn from the upper half of its step: 100, 200, then 300 ms at most.
    [50, 100, 150, 150, 150].forEach((lowest, i) => expect(gaps[i]).toBeGreaterThanOrEqual(lowest - 1));
    expect(Math.max(...gaps)).toBeLessThan(300 + 250);
  });

  it.each([[{ concurrency: 0 }], [{ leaseSeconds: 2.5 }], [{ leaseSeconds: 3_000_000 }], [{ jitter: 1 }]])(
    'rejects %p before popping',
    async (options) => {
      await expect(start(() => undefined, options)).rejects.toBeInstanceOf(RangeError);
      expect(broker.requestsTo('pop')).toHaveLength(0);
    },
  );
});
