import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import {
  consume,
  LeaseholdClient,
  LeaseLostError,
  type AckBatchOptions,
  type AckResult,
  type Acknowledgment,
  type ConsumeContext,
  type ConsumeStage,
  type ExtendResult,
  type Message,
  type PopOptions,
  type PopResponse,
  type RequestOptions,
} from '../client/src';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { cursors, expireLeases, storedCounts } from './support/db-state';
import { TcpProxy } from './support/tcp-proxy';
import { createTestApp, newTenant } from './support/test-app';
import { waitFor } from './support/wait';

const QUEUE = 'jobs';
const GROUP = 'workers';
/**
 * Slack on multi-second budgets for timers, the event loop and a request's way there and back, on a
 * loaded machine (300 ms was passed by 7 ms there). With the 2 s leases below, one renewal interval
 * plus this still ends before the lease would have: an abort within it cannot be the lease expiring.
 */
const MARGIN_MS = 800;
/**
 * Consumers here poll briefly: the tests time renewals and redeliveries, and a
 * short poll keeps a consumer stopped by a test from lingering. That parked
 * polls wake on redelivery is tested in wakeups.e2e-spec.ts and below.
 */
const RIVAL_WAIT_MS = 200;

/** The longest time between two renewals with the keeper's default renewFraction of a third. */
const renewalIntervalMs = (leaseSeconds: number): number => (leaseSeconds * 1000) / 3;

interface PopRecord {
  sentAt: number;
  answeredAt: number;
  batch: PopResponse;
}

interface RenewalRecord {
  sentAt: number;
  renewed: number | null;
  error?: unknown;
}

interface AckRecord {
  sentAt: number;
  acknowledgments: Acknowledgment[];
  results?: AckResult[];
}

/** Opens once; a request waiting at it fails with its signal's reason if that comes first, as fetch would. */
class Gate {
  private open!: () => void;
  private readonly opened = new Promise<void>((resolve) => (this.open = resolve));

  release(): void {
    this.open();
  }

  pass(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const abandon = (): void => reject(signal!.reason);
      if (signal?.aborted) return abandon();
      signal?.addEventListener('abort', abandon, { once: true });
      void this.opened.then(() => {
        signal?.removeEventListener('abort', abandon);
        resolve();
      });
    });
  }
}

/**
 * The real client, noting what it sent and what came back on the monotonic
 * clock, and able to hold its renewals back, as if this machine were
 * suspended, until they are released.
 */
class RecordingClient extends LeaseholdClient {
  readonly pops: PopRecord[] = [];
  readonly renewals: RenewalRecord[] = [];
  readonly acks: AckRecord[] = [];
  polls = 0;
  /** Renewal attempts that reached a closed gate. */
  heldBack = 0;
  private held: Gate | undefined;

  constructor(baseUrl: string, tenant: string) {
    // Short enough that a client which wrongly acks into a dead network fails the test, not the jest timeout.
    super({ baseUrl, tenant, timeoutMs: 5_000 });
  }

  holdRenewals(): void {
    this.held ??= new Gate();
  }

  releaseRenewals(): void {
    this.held?.release();
    this.held = undefined;
  }

  override async pop<T = unknown>(queue: string, options: PopOptions = {}): Promise<PopResponse<T> | null> {
    const sentAt = performance.now();
    const batch = await super.pop<T>(queue, options);
    this.polls += 1;
    if (batch) this.pops.push({ sentAt, answeredAt: performance.now(), batch });
    return batch;
  }

  override async extend(leaseId: string, seconds?: number, options?: RequestOptions): Promise<ExtendResult> {
    if (this.held) {
      this.heldBack += 1;
      await this.held.pass(options?.signal);
    }
    const sentAt = performance.now();
    try {
      const result = await super.extend(leaseId, seconds, options);
      this.renewals.push({ sentAt, renewed: result.renewed });
      return result;
    } catch (error) {
      this.renewals.push({ sentAt, renewed: null, error });
      throw error;
    }
  }

  /** nackBatch goes through here too, so this sees every ack and nack consume sends. */
  override async ackBatch(acknowledgments: Acknowledgment[], options?: AckBatchOptions): Promise<AckResult[]> {
    const record: AckRecord = { sentAt: performance.now(), acknowledgments };
    this.acks.push(record);
    record.results = await super.ackBatch(acknowledgments, options);
    return record.results;
  }
}

interface Delivery {
  receivedAt: number;
  leaseId: string;
  messages: Message[];
  endedAt?: number;
  abortedAt?: number;
  abortReason?: unknown;
}

interface RunningConsumer {
  client: RecordingClient;
  deliveries: Delivery[];
  leaseLosses: LeaseLostError[];
  errors: Array<{ stage: ConsumeStage; error: unknown }>;
  /** Settles when consume returns. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/** Resolves once the signal aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** Work that takes ms, or stops with the signal's reason, as a careful handler does. */
function work(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const quit = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', quit);
      resolve();
    }, ms);
    signal.addEventListener('abort', quit, { once: true });
  });
}

/**
 * A live broker on a real port, driven only through the client package: the
 * lease keeper against real renewals, real expiry and real redelivery.
 * Nothing here needs two transactions at once, so it runs on the embedded
 * database as well as on PostgreSQL.
 */
describe('the client against a live broker', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let baseUrl: string;
  let brokerPort: number;
  let tenant: string;
  let producer: LeaseholdClient;
  let running: RunningConsumer[];
  let proxy: TcpProxy | undefined;

  beforeAll(async () => {
    app = await createTestApp();
    await app.listen(0, '127.0.0.1');
    dataSource = app.get(Database);
    brokerPort = (app.getHttpServer().address() as AddressInfo).port;
    baseUrl = `http://127.0.0.1:${brokerPort}`;
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    tenant = newTenant();
    producer = new LeaseholdClient({ baseUrl, tenant });
    running = [];
    proxy = undefined;
  });

  afterEach(async () => {
    await Promise.all(running.map((consumer) => consumer.stop()));
    await proxy?.stop();
  });

  async function pushJobs(count: number): Promise<void> {
    const results = await producer.push(
      Array.from({ length: count }, (_, n) => ({ queue: QUEUE, payload: { n }, transactionId: `job-${n}` })),
    );
    expect(results.map((result) => result.status)).toEqual(Array(count).fill('queued'));
  }

  /**
   * consume() on one client of the test's tenant, in the group GROUP. Every
   * batch handed to the handler is recorded with when it arrived, ended and
   * had its signal aborted. With stopOnLeaseLost the consumer stops the moment
   * it reports a lost lease, so a redelivered batch can only go to another one.
   */
  function startConsumer(options: {
    leaseSeconds: number;
    client?: RecordingClient;
    handler?: (messages: Message[], context: ConsumeContext) => Promise<void>;
    stopOnLeaseLost?: boolean;
    waitTimeoutMs?: number;
  }): RunningConsumer {
    const client = options.client ?? new RecordingClient(baseUrl, tenant);
    const stopping = new AbortController();
    const consumer: Omit<RunningConsumer, 'done' | 'stop'> = { client, deliveries: [], leaseLosses: [], errors: [] };
    const done = consume(
      QUEUE,
      async (messages, context) => {
        const delivery: Delivery = { receivedAt: performance.now(), leaseId: context.leaseId, messages };
        consumer.deliveries.push(delivery);
        context.signal.addEventListener(
          'abort',
          () => {
            delivery.abortedAt = performance.now();
            delivery.abortReason = context.signal.reason;
          },
          { once: true },
        );
        try {
          await options.handler?.(messages, context);
        } finally {
          delivery.endedAt = performance.now();
        }
      },
      {
        client,
        signal: stopping.signal,
        consumerGroup: GROUP,
        batch: 10,
        leaseSeconds: options.leaseSeconds,
        waitTimeoutMs: options.waitTimeoutMs ?? RIVAL_WAIT_MS,
        // Whatever a test leaves running is let go at once in afterEach, never acked on the way out.
        onStop: 'abandon',
        onLeaseLost: (error) => {
          consumer.leaseLosses.push(error);
          if (options.stopOnLeaseLost) stopping.abort();
        },
        onError: (error, stage) => consumer.errors.push({ stage, error }),
      },
    );
    const handle: RunningConsumer = {
      ...consumer,
      done,
      stop: async () => {
        stopping.abort();
        await done;
      },
    };
    running.push(handle);
    return handle;
  }

  /** What a second consumer of the group ends up with: a cursor past every job, no lease, nothing left to pop. */
  async function expectAllAckedAndNoLease(count: number): Promise<void> {
    expect(await cursors(dataSource, tenant, QUEUE)).toEqual([
      expect.objectContaining({ consumerGroup: GROUP, committedOffset: count, leaseId: null, leaseLive: false }),
    ]);
    expect(await producer.pop(QUEUE, { consumerGroup: GROUP, batch: 10 })).toBeNull();
  }

  const untilLeaseLost = async (_messages: Message[], { signal }: ConsumeContext): Promise<void> => {
    // Returns normally once the lease is gone, as a handler that finishes anyway would:
    // consume must still not ack.
    await aborted(signal);
  };

  /** Renewed every time until one renewal renewed nothing, then never asked again: an expired lease stays expired. */
  const expectRenewedUntilLost = (renewals: RenewalRecord[]): void => {
    expect(renewals.map((renewal) => renewal.renewed)).toEqual([...Array(renewals.length - 1).fill(1), 0]);
  };

  const ackAnswered = (consumer: RunningConsumer): boolean =>
    consumer.client.acks.some((ack) => ack.results !== undefined);

  const transactionIds = (delivery: Delivery) => delivery.messages.map((message) => message.transactionId);
  const attempts = (delivery: Delivery) => delivery.messages.map((message) => message.deliveryAttempt);

  it("records a handler's traces, which the broker answers by message with the consumer's group", async () => {
    await pushJobs(1);
    const traced: Array<string | null> = [];
    const consumer = startConsumer({
      leaseSeconds: 30,
      handler: async (messages, context) => {
        traced.push(await context.trace(messages[0], { charged: 12 }, { eventType: 'processing', traceNames: 'job' }));
      },
    });

    await waitFor(() => ackAnswered(consumer), 'the message is handled and acked', 15_000);

    expect(traced).toEqual([expect.any(String)]);
    const [message] = consumer.deliveries[0].messages;
    const traces = await fetch(`${baseUrl}/api/v1/traces/${message.partitionId}/${message.transactionId}`, {
      headers: { 'x-queen-tenant': tenant },
    }).then((response) => response.json() as Promise<{ traces: unknown[] }>);
    expect(traces.traces).toEqual([
      expect.objectContaining({
        id: traced[0],
        event_type: 'processing',
        data: { charged: 12 },
        consumer_group: GROUP,
      }),
    ]);
  });

  it('started before its queue exists, waits in a long poll and gets the first message pushed, without a single onError call', async () => {
    const consumer = startConsumer({ leaseSeconds: 30, waitTimeoutMs: 120_000 });
    const wakeup = app.get(ParkedPolls);
    await waitFor(() => wakeup.parkedCount(tenant, QUEUE, GROUP) === 1, 'the first poll parks', 15_000);
    expect(await storedCounts(dataSource, tenant)).toMatchObject({ queues: 0 });

    await pushJobs(1);

    await waitFor(() => ackAnswered(consumer), 'the message is handled and acked', 15_000);
    expect(consumer.deliveries.map(transactionIds)).toEqual([['job-0']]);
    // The parked poll itself brought it: not a 204 at its timeout and a second poll.
    expect(consumer.client.pops.map((pop) => pop.batch.messages.length)).toEqual([1]);
    expect(consumer.client.polls).toBe(1);
    expect(consumer.errors).toEqual([]);
  });

  it('keeps the lease of a handler working nearly three times longer than leaseSeconds, acks once, and a second consumer of the group polling all along never gets the batch', async () => {
    await pushJobs(3);
    // Two seconds, not one: a loaded machine may hold a renewal up for a second without the keeper being at fault.
    const slow = startConsumer({ leaseSeconds: 2, handler: (_messages, { signal }) => work(5_500, signal) });
    await waitFor(() => slow.deliveries.length === 1, 'the slow consumer gets the batch', 5_000);
    const rival = startConsumer({ leaseSeconds: 10 });

    await waitFor(() => ackAnswered(slow), 'the ack', 10_000);
    const pollsAtAck = rival.client.polls;
    // Give the rival two more looks after the ack: nothing may come back.
    await waitFor(() => rival.client.polls >= pollsAtAck + 2, 'the rival polls after the ack', 5_000);
    await Promise.all([slow.stop(), rival.stop()]);

    const [delivery] = slow.deliveries;
    expect(slow.deliveries).toHaveLength(1);
    expect(transactionIds(delivery)).toEqual(['job-0', 'job-1', 'job-2']);
    expect(attempts(delivery)).toEqual([1, 1, 1]);
    expect(delivery.endedAt! - delivery.receivedAt).toBeGreaterThanOrEqual(5_000);
    // Its signal never aborted while it worked (a renewal crossing the ack may find the lease gone after).
    expect(delivery.abortedAt ?? Infinity).toBeGreaterThanOrEqual(delivery.endedAt!);
    expect(slow.leaseLosses).toEqual([]);
    expect(slow.errors).toEqual([]);

    expect(slow.client.acks).toHaveLength(1);
    const [ack] = slow.client.acks;
    // At least one renewal per second of work, every one of them a real renewal, not just a 200.
    // The keeper renews until the ack has landed, so the lease cannot lapse under an ack in flight;
    // a renewal crossing the ack is cancelled once it has (or renews nothing), so it is not counted.
    const beforeAck = slow.client.renewals.filter((renewal) => renewal.sentAt < ack.sentAt);
    expect(beforeAck.length).toBeGreaterThanOrEqual(5);
    expect(beforeAck.every((renewal) => renewal.renewed === 1)).toBe(true);
    expect(slow.client.renewals.length - beforeAck.length).toBeLessThanOrEqual(1);
    expect(ack.acknowledgments).toEqual(
      delivery.messages.map(({ transactionId, partitionId, leaseEpoch }) => ({
        transactionId,
        partitionId,
        leaseId: delivery.leaseId,
        leaseEpoch,
        status: 'completed',
      })),
    );
    expect(ack.results!.map(({ success, leaseReleased }) => ({ success, leaseReleased }))).toEqual([
      { success: true, leaseReleased: false },
      { success: true, leaseReleased: false },
      { success: true, leaseReleased: true },
    ]);

    expect(rival.client.polls).toBeGreaterThanOrEqual(10);
    expect(rival.deliveries).toEqual([]);
    expect(rival.errors).toEqual([]);
    await expectAllAckedAndNoLease(3);
  });

  describe('a handler whose lease is taken away', () => {
    it('aborts within one renewal interval when renewal, held back while the lease expired and another consumer claimed the batch, resumes and renews 0; sends no ack; the batch is redelivered exactly once', async () => {
      const leaseSeconds = 2;
      await pushJobs(2);
      const stale = startConsumer({ leaseSeconds, handler: untilLeaseLost, stopOnLeaseLost: true });
      await waitFor(() => stale.deliveries.length === 1, 'the stale consumer gets the batch', 5_000);
      const rival = startConsumer({ leaseSeconds: 10 });
      // Held right after a renewal, the keeper's own deadline is ~2 s off: it cannot be what ends the lease.
      await waitFor(() => stale.client.renewals.some((renewal) => renewal.renewed === 1), 'a first renewal', 5_000);
      stale.client.holdRenewals();

      // The broker's clock runs past the lease while this machine's monotonic clock stands still
      // (a suspended VM or laptop: CLOCK_MONOTONIC stops with it). That is the only way a renewal
      // can find its lease expired: otherwise the keeper's own deadline, never later than the
      // broker's, comes first (the network tests below).
      await expireLeases(dataSource, tenant, stale.deliveries[0].leaseId);
      await waitFor(() => ackAnswered(rival), 'the rival acks', 5_000);
      await waitFor(() => stale.client.heldBack > 0, 'the keeper tries to renew while held back', 5_000);
      const lossesWhileHeld = stale.leaseLosses.length;
      const resumedAt = performance.now();
      stale.client.releaseRenewals();
      await waitFor(() => stale.leaseLosses.length === 1, 'the stale consumer reports the loss', 5_000);
      await stale.done;
      await rival.stop();

      const [delivery] = stale.deliveries;
      expect(lossesWhileHeld).toBe(0);
      expect(delivery.abortReason).toBeInstanceOf(LeaseLostError);
      expect(delivery.abortReason).toMatchObject({ kind: 'not-renewed', leaseId: delivery.leaseId });
      expect(delivery.abortedAt! - resumedAt).toBeLessThanOrEqual(renewalIntervalMs(leaseSeconds) + MARGIN_MS);
      expect(stale.leaseLosses).toHaveLength(1);
      expect(stale.leaseLosses[0]).toBe(delivery.abortReason);
      expectRenewedUntilLost(stale.client.renewals);
      expect(stale.client.acks).toEqual([]);

      expect(rival.deliveries).toHaveLength(1);
      const [redelivery] = rival.deliveries;
      expect(transactionIds(redelivery)).toEqual(transactionIds(delivery));
      expect(attempts(redelivery)).toEqual([2, 2]);
      expect(redelivery.leaseId).not.toBe(delivery.leaseId);
      expect(rival.client.acks[0].results!.every((result) => result.success)).toBe(true);
      await expectAllAckedAndNoLease(2);
    });

    it('aborts within one renewal interval when another party nacks the batch with its lease id; sends no ack; the batch is redelivered to another consumer exactly once', async () => {
      const leaseSeconds = 2;
      await pushJobs(2);
      const stale = startConsumer({ leaseSeconds, handler: untilLeaseLost, stopOnLeaseLost: true });
      await waitFor(() => stale.deliveries.length === 1, 'the stale consumer gets the batch', 5_000);
      const rival = startConsumer({ leaseSeconds: 10 });
      const [delivery] = stale.deliveries;
      const [first] = delivery.messages;

      const nack = await producer.nack(
        {
          transactionId: first.transactionId,
          partitionId: first.partitionId,
          consumerGroup: GROUP,
          leaseId: delivery.leaseId,
        },
        'cancelled by an operator',
      );
      const releasedAt = performance.now();
      await waitFor(() => stale.leaseLosses.length === 1, 'the stale consumer reports the loss', 5_000);
      await waitFor(() => ackAnswered(rival), 'the rival acks', 5_000);
      await stale.done;
      await rival.stop();

      expect(nack).toMatchObject({ success: true, leaseReleased: true });
      expect(delivery.abortReason).toBeInstanceOf(LeaseLostError);
      expect(delivery.abortReason).toMatchObject({ kind: 'not-renewed', leaseId: delivery.leaseId });
      expect(delivery.abortedAt! - releasedAt).toBeLessThanOrEqual(renewalIntervalMs(leaseSeconds) + MARGIN_MS);
      expect(stale.leaseLosses).toHaveLength(1);
      expect(stale.leaseLosses[0]).toBe(delivery.abortReason);
      expectRenewedUntilLost(stale.client.renewals);
      expect(stale.client.acks).toEqual([]);

      expect(rival.deliveries).toHaveLength(1);
      const [redelivery] = rival.deliveries;
      expect(transactionIds(redelivery)).toEqual(['job-0', 'job-1']);
      expect(attempts(redelivery)).toEqual([2, 2]);
      expect(rival.client.acks[0].results!.every((result) => result.success)).toBe(true);
      await expectAllAckedAndNoLease(2);
    });

    it('aborts within one renewal interval when another party acks the batch without a lease id; sends no ack; nothing is redelivered', async () => {
      const leaseSeconds = 2;
      await pushJobs(2);
      const stale = startConsumer({ leaseSeconds, handler: untilLeaseLost, stopOnLeaseLost: true });
      await waitFor(() => stale.deliveries.length === 1, 'the stale consumer gets the batch', 5_000);
      const rival = startConsumer({ leaseSeconds: 10 });
      const [delivery] = stale.deliveries;

      const acked = await producer.ackBatch(
        delivery.messages.map(({ transactionId, partitionId }) => ({
          transactionId,
          partitionId,
          status: 'completed' as const,
        })),
        { consumerGroup: GROUP },
      );
      const releasedAt = performance.now();
      await waitFor(() => stale.leaseLosses.length === 1, 'the stale consumer reports the loss', 5_000);
      await stale.done;
      const pollsAtLoss = rival.client.polls;
      await waitFor(() => rival.client.polls >= pollsAtLoss + 2, 'the rival polls after the loss', 5_000);
      await rival.stop();

      expect(acked.map(({ success, leaseReleased }) => ({ success, leaseReleased }))).toEqual([
        { success: true, leaseReleased: false },
        { success: true, leaseReleased: true },
      ]);
      expect(delivery.abortReason).toBeInstanceOf(LeaseLostError);
      expect(delivery.abortReason).toMatchObject({ kind: 'not-renewed', leaseId: delivery.leaseId });
      expect(delivery.abortedAt! - releasedAt).toBeLessThanOrEqual(renewalIntervalMs(leaseSeconds) + MARGIN_MS);
      expect(stale.leaseLosses).toHaveLength(1);
      expect(stale.leaseLosses[0]).toBe(delivery.abortReason);
      expectRenewedUntilLost(stale.client.renewals);
      expect(stale.client.acks).toEqual([]);
      expect(rival.deliveries).toEqual([]);
      await expectAllAckedAndNoLease(2);
    });
  });

  describe('network failure during renewal', () => {
    it.each([
      ['refuses every connection', (cut: TcpProxy) => cut.stop()],
      ['drops every packet', async (cut: TcpProxy) => cut.silence()],
    ])(
      'aborts the handler with a LeaseLostError by the lease deadline when the way to the broker %s after the pop; sends no ack; another consumer gets the batch only after the lease expired',
      async (_failure, cutOff) => {
        const leaseSeconds = 2;
        proxy = new TcpProxy('127.0.0.1', brokerPort);
        await proxy.start();
        const behindProxy = new RecordingClient(`http://127.0.0.1:${proxy.port}`, tenant);
        await pushJobs(2);
        const cut = proxy;
        const stale = startConsumer({
          leaseSeconds,
          client: behindProxy,
          // Cut as soon as the batch is in hand, before the keeper's first renewal.
          handler: async (messages, context) => {
            await cutOff(cut);
            await untilLeaseLost(messages, context);
          },
          stopOnLeaseLost: true,
        });
        await waitFor(() => stale.deliveries.length === 1, 'the stale consumer gets the batch', 5_000);
        const rival = startConsumer({ leaseSeconds: 10 });

        await waitFor(() => stale.leaseLosses.length === 1, 'the stale consumer reports the loss', 5_000);
        await stale.done;
        await waitFor(() => ackAnswered(rival), 'the rival acks', 5_000);
        await rival.stop();

        const [pop] = behindProxy.pops;
        const [delivery] = stale.deliveries;
        expect(delivery.abortReason).toBeInstanceOf(LeaseLostError);
        expect(delivery.abortReason).toMatchObject({ kind: 'deadline-passed', leaseId: delivery.leaseId });
        // The cause is what the last renewal that went out failed with.
        expect(behindProxy.renewals.map((renewal) => renewal.error)).toContain(
          (delivery.abortReason as LeaseLostError).cause,
        );
        expect(delivery.abortedAt! - pop.answeredAt).toBeLessThanOrEqual(leaseSeconds * 1000 + MARGIN_MS);
        // It kept retrying up to its deadline rather than giving up at the first failed renewal
        // (20 ms: a timer may fire a millisecond early).
        expect(delivery.abortedAt! - pop.sentAt).toBeGreaterThanOrEqual(leaseSeconds * 1000 - 20);
        expect(behindProxy.renewals.length).toBeGreaterThanOrEqual(2);
        expect(behindProxy.renewals.every((renewal) => renewal.renewed === null)).toBe(true);
        expect(stale.leaseLosses).toHaveLength(1);
        expect(stale.leaseLosses[0]).toBe(delivery.abortReason);
        expect(behindProxy.acks).toEqual([]);

        expect(rival.deliveries).toHaveLength(1);
        const [redelivery] = rival.deliveries;
        expect(transactionIds(redelivery)).toEqual(['job-0', 'job-1']);
        expect(attempts(redelivery)).toEqual([2, 2]);
        // The broker kept the lease while the holder was cut off: it lapsed, it was not dropped.
        expect(redelivery.receivedAt - pop.sentAt).toBeGreaterThanOrEqual(leaseSeconds * 1000 - 20);
        expect(rival.client.acks[0].results!.every((result) => result.success)).toBe(true);
        await expectAllAckedAndNoLease(2);
      },
    );
  });
});

describe('the client against a broker with a ceiling on lease length', () => {
  const CEILING_SECONDS = 4;
  let app: NestExpressApplication;
  let baseUrl: string;

  beforeAll(async () => {
    app = await createTestApp({ LEASE_MAX_TOTAL_SECONDS: String(CEILING_SECONDS) });
    await app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app.close();
  });

  it('hears of the coming end before it, and loses the lease at the ceiling, not later', async () => {
    const tenant = newTenant();
    const producer = new LeaseholdClient({ baseUrl, tenant });
    await producer.push([{ queue: QUEUE, payload: { n: 0 }, transactionId: 'stuck' }]);
    const stopping = new AbortController();
    const events: Array<{ what: 'handler' | 'ending' | 'lost'; at: number; remainingMs?: number; kind?: string }> = [];
    let epoch = 0;

    const done = consume(
      QUEUE,
      async (messages, context) => {
        epoch = messages[0].leaseEpoch;
        events.push({ what: 'handler', at: performance.now() });
        // A stuck handler: it only ever stops when its lease does.
        await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
      },
      {
        client: new LeaseholdClient({ baseUrl, tenant }),
        consumerGroup: GROUP,
        leaseSeconds: 2,
        waitTimeoutMs: 200,
        signal: stopping.signal,
        onLeaseEnding: (notice) =>
          events.push({ what: 'ending', at: performance.now(), remainingMs: notice.remainingMs }),
        onLeaseLost: (error) => {
          events.push({ what: 'lost', at: performance.now(), kind: error.kind });
          stopping.abort();
        },
      },
    );
    await done;

    expect(events.map((event) => event.what)).toEqual(['handler', 'ending', 'lost']);
    const [handler, ending, lost] = events;
    expect(lost.kind).toBe('ceiling-reached');
    expect(ending.remainingMs).toBeGreaterThan(0);
    expect(lost.at).toBeGreaterThan(ending.at);
    // The keeper's deadline is on the safe side of the broker's: never after the ceiling (give or
    // take a late timer on a loaded machine).
    expect(lost.at - handler.at).toBeLessThanOrEqual(CEILING_SECONDS * 1000 + 1000);
    const redelivered = await producer.pop(QUEUE, { consumerGroup: GROUP, wait: true, timeout: 10_000 });
    expect(redelivered?.messages[0]).toMatchObject({ transactionId: 'stuck', leaseEpoch: epoch + 1 });
  });
});
