import { checkKeeperOptions, LeaseKeeper, type LeaseEndingNotice } from './lease-keeper';
import { LeaseLostError } from './lease-lost-error';
import type { LeaseholdClient } from './leasehold-client';
import { notify } from './notify';
import { linkSignals } from './signals';
import { backoffDelay, monotonicNow, sleep } from './timing';
import { Transaction, TransactionFailedError } from './transaction';
import type { AckResult, Acknowledgment, Message, PopOptions, PopResponse, TraceOptions } from './types';

export type ConsumerClient = Pick<LeaseholdClient, 'pop' | 'extend' | 'ackBatch' | 'nackBatch'> &
  Partial<Pick<LeaseholdClient, 'trace'>>;

export interface ConsumeContext<T = unknown> {
  signal: AbortSignal;
  leaseId: string;
  pop: PopResponse<T>;
  /**
   * Records what the handler did with one of its messages. Never rejects: a trace that could not be recorded goes to
   * `onError` (stage `trace`) and resolves with null, so tracing cannot fail the batch.
   */
  trace(message: Message<T>, data: unknown, options?: TraceOptions): Promise<string | null>;
}

export type ConsumeHandler<T = unknown> = (messages: Message<T>[], context: ConsumeContext<T>) => unknown;

export type ConsumeStage = 'pop' | 'handler' | 'ack' | 'nack' | 'commit' | 'trace';

export interface ConsumeOptions<T = unknown> extends Pick<
  PopOptions,
  'partition' | 'batch' | 'partitions' | 'consumerGroup' | 'subscriptionMode' | 'subscriptionFrom'
> {
  client: ConsumerClient;
  signal?: AbortSignal | undefined;
  leaseSeconds?: number | undefined;
  waitTimeoutMs?: number | undefined;
  concurrency?: number | undefined;
  onStop?: 'finish' | 'abandon' | undefined;
  renewFraction?: number | undefined;
  jitter?: number | undefined;
  backoffInitialMs?: number | undefined;
  backoffMaxMs?: number | undefined;
  onLeaseLost?: ((error: LeaseLostError, messages: Message<T>[]) => void) | undefined;
  onLeaseEnding?: ((notice: LeaseEndingNotice, messages: Message<T>[]) => void) | undefined;
  onError?: ((error: unknown, stage: ConsumeStage) => void) | undefined;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

const DEFAULT_LEASE_SECONDS = 30;
const DEFAULT_BACKOFF_INITIAL_MS = 200;
const DEFAULT_BACKOFF_MAX_MS = 10_000;
const LEASE_REJECTION = 'invalid or expired lease';
const ABANDONED = Symbol('abandoned');

export async function consume<T = unknown>(
  queue: string,
  handler: ConsumeHandler<T>,
  options: ConsumeOptions<T>,
): Promise<void> {
  const concurrency = options.concurrency ?? 1;
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  }
  checkKeeperOptions({
    leaseSeconds,
    renewFraction: options.renewFraction,
    jitter: options.jitter,
  });
  const consumer = new Consumer(queue, handler, options, leaseSeconds);
  await Promise.all(Array.from({ length: concurrency }, () => consumer.work()));
}

class Consumer<T> {
  private readonly client: ConsumerClient;
  private readonly stopSignal: AbortSignal;
  private readonly popOptions: PopOptions;

  constructor(
    private readonly queue: string,
    private readonly handler: ConsumeHandler<T>,
    private readonly options: ConsumeOptions<T>,
    private readonly leaseSeconds: number,
  ) {
    this.client = options.client;
    this.stopSignal = options.signal ?? new AbortController().signal;
    this.popOptions = {
      partition: options.partition,
      batch: options.batch,
      partitions: options.partitions,
      consumerGroup: options.consumerGroup,
      subscriptionMode: options.subscriptionMode,
      subscriptionFrom: options.subscriptionFrom,
      wait: true,
      timeout: options.waitTimeoutMs,
      leaseSeconds,
    };
  }

  async work(): Promise<void> {
    let failures = 0;
    while (!this.stopSignal.aborted) {
      const sentAt = monotonicNow();
      let pop: PopResponse<T> | null;
      try {
        pop = await this.client.pop<T>(this.queue, {
          ...this.popOptions,
          signal: this.stopSignal,
        });
      } catch (error) {
        if (this.stopSignal.aborted) {
          return;
        }
        failures += 1;
        this.report(error, 'pop');
        await sleep(
          backoffDelay(
            failures,
            this.options.backoffInitialMs ?? DEFAULT_BACKOFF_INITIAL_MS,
            this.options.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS,
          ),
          this.stopSignal,
        );
        continue;
      }
      failures = 0;
      if (pop !== null && pop.messages.length > 0) {
        await this.process(pop, leaseStart(sentAt, monotonicNow(), this.leaseSeconds));
      }
    }
  }

  private async process(pop: PopResponse<T>, acquiredAt: number): Promise<void> {
    const abandonOnStop = this.options.onStop === 'abandon' ? this.stopSignal : undefined;
    if (abandonOnStop?.aborted) {
      return;
    }
    const keeper = new LeaseKeeper(this.client, {
      leaseId: pop.leaseId,
      leaseSeconds: this.leaseSeconds,
      acquiredAt,
      renewFraction: this.options.renewFraction,
      jitter: this.options.jitter,
      onEnding: (notice) => this.options.onLeaseEnding?.(notice, pop.messages),
    });
    const handlerSignal = linkSignals([keeper.signal, abandonOnStop]);
    try {
      const outcome = await unlessAborted(
        this.runHandler(pop, {
          signal: handlerSignal.signal,
          leaseId: pop.leaseId,
          pop,
          trace: (message, data, options) => this.trace(message, data, options),
        }),
        abandonOnStop,
      );
      if (outcome === ABANDONED) {
        return;
      }
      const lost = keeper.lost;
      if (lost) {
        this.leaseLost(lost, pop.messages);
      } else if (outcome.ok && outcome.value instanceof Transaction) {
        await this.commit(pop, outcome.value);
      } else if (outcome.ok) {
        await this.ack(pop);
      } else {
        this.report(outcome.error, 'handler');
        await this.nack(pop, outcome.error);
      }
    } finally {
      handlerSignal.unlink();
      keeper.stop();
    }
  }

  private runHandler(pop: PopResponse<T>, context: ConsumeContext<T>): Promise<Outcome> {
    return Promise.resolve()
      .then(() => this.handler(pop.messages, context))
      .then(
        (value: unknown): Outcome => ({ ok: true, value }),
        (error: unknown): Outcome => ({ ok: false, error }),
      );
  }

  private async ack(pop: PopResponse<T>): Promise<void> {
    let results: AckResult[];
    try {
      results = await this.client.ackBatch(
        this.acknowledgments(pop).map((acknowledgment) => ({
          ...acknowledgment,
          status: 'completed',
        })),
        { consumerGroup: this.options.consumerGroup },
      );
    } catch (error) {
      this.report(error, 'ack');
      return;
    }
    const refused = results.filter((result) => !result.success);
    if (refused.some(isLeaseRejection)) {
      this.leaseLost(new LeaseLostError(pop.leaseId, 'ack-rejected'), pop.messages);
    } else if (refused.length > 0) {
      this.report(new Error(`ack refused for ${refused.length} message(s): ${refused[0]?.error}`), 'ack');
    }
  }

  /**
   * Commits the handler's transaction with an ack of every message of the batch it does not
   * ack itself, under the batch's lease: the output is pushed only if the input is acked by
   * the holder of a live lease. The keeper renews until the answer comes.
   */
  private async commit(pop: PopResponse<T>, transaction: Transaction): Promise<void> {
    for (const message of pop.messages) {
      if (!transaction.acks(message)) transaction.ack(message);
    }
    transaction.requireLease(pop.leaseId);
    try {
      await transaction.commit();
    } catch (error) {
      if (error instanceof TransactionFailedError && error.reason === 'lease_lost') {
        this.leaseLost(new LeaseLostError(pop.leaseId, 'commit-rejected', { cause: error }), pop.messages);
        return;
      }
      this.report(error, 'commit');
      // Rolled back for a reason of its own: the batch failed, as if the handler had thrown.
      if (error instanceof TransactionFailedError) await this.nack(pop, error);
    }
  }

  private async nack(pop: PopResponse<T>, failure: unknown): Promise<void> {
    const text = errorMessage(failure);
    let results: AckResult[];
    try {
      results = await this.client.nackBatch(this.acknowledgments(pop), text, {
        consumerGroup: this.options.consumerGroup,
      });
    } catch (error) {
      this.report(error, 'nack');
      return;
    }
    // The first failure releases the lease, so later entries of a healthy nack are refused
    // too; the lease was already gone only when none of them went through.
    if (results.length > 0 && results.every((result) => !result.success) && results.some(isLeaseRejection)) {
      this.leaseLost(new LeaseLostError(pop.leaseId, 'ack-rejected'), pop.messages);
    }
  }

  private acknowledgments(pop: PopResponse<T>): Omit<Acknowledgment, 'status' | 'error'>[] {
    return pop.messages.map((message) => ({
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      leaseId: pop.leaseId,
      // A broker that predates fencing epochs sends none, and is sent none.
      ...(typeof message.leaseEpoch === 'number' ? { leaseEpoch: message.leaseEpoch } : {}),
    }));
  }

  private leaseLost(error: LeaseLostError, messages: Message<T>[]): void {
    notify(() => this.options.onLeaseLost?.(error, messages));
  }

  private async trace(message: Message<T>, data: unknown, options?: TraceOptions): Promise<string | null> {
    try {
      if (!this.client.trace) throw new Error('this client cannot record traces');
      return (await this.client.trace(message, data, options)).traceId;
    } catch (error) {
      this.report(error, 'trace');
      return null;
    }
  }

  private report(error: unknown, stage: ConsumeStage): void {
    notify(() => this.options.onError?.(error, stage));
  }
}

// A parked long poll claims its batch only when it answers, so counting from the send would
// be early by the whole wait: count from the answer, less a tenth of the lease (a second at
// most) for its way back. A quick pop still counts from the send.
function leaseStart(sentAt: number, answeredAt: number, leaseSeconds: number): number {
  return Math.max(sentAt, answeredAt - Math.min(1_000, leaseSeconds * 100));
}

function errorMessage(failure: unknown): string {
  const message = (failure as { message?: unknown } | null)?.message;
  return typeof message === 'string' && message !== '' ? message : String(failure);
}

function isLeaseRejection(result: AckResult): boolean {
  return !result.success && (result.error ?? '').includes(LEASE_REJECTION);
}

function unlessAborted<V>(work: Promise<V>, signal?: AbortSignal): Promise<V | typeof ABANDONED> {
  if (!signal) {
    return work;
  }
  return new Promise((resolve) => {
    const abandon = (): void => resolve(ABANDONED);
    signal.addEventListener('abort', abandon, { once: true });
    void work.then((value) => {
      signal.removeEventListener('abort', abandon);
      resolve(value);
    });
  });
}
