import { subscribe } from 'node:diagnostics_channel';
import { inspect } from 'node:util';
import { DeliveredMessage, Ledger } from './ledger';

export type Route = 'push' | 'pop' | 'ack' | 'extend' | 'health';

/** One HTTP call as the client saw it. */
export interface Call {
  route: Route;
  broker: number;
  sentAt: number;
  answeredAt: number;
  status?: number;
  body?: unknown;
  error?: string;
  connection?: string | null;
  /**
   * Whether its request went out on a connection that had carried an earlier one; undefined when its headers never
   * went out on any.
   */
  reusedConnection?: boolean;
}

export interface WorkloadOptions {
  /** Base URLs; a client moves to the next one when a call fails or answers 503. */
  brokers: string[];
  tenantHeader: string;
  tenant: string;
  queue: string;
  partitions: number;
  messagesPerPartition: number;
  consumers: number;
  leaseSeconds: number;
  batch?: number;
  /** Pause between two pushes of one producer, so the run lasts while faults happen. */
  pushIntervalMs?: number;
  /** Every n-th batch a consumer gets is nacked (status failed) instead of acked. */
  nackEvery?: number;
  /** Renew each batch's lease once before acknowledging it. */
  extend?: boolean;
  popTimeoutMs?: number;
  requestTimeoutMs?: number;
}

/**
 * Which connection a call's request went out on: fetch says so only through undici's diagnostics channel, whose
 * messages name the request by its headers, so each call carries its number in one of its own.
 */
const CALL_HEADER = 'x-workload-call';
const CALL_NUMBER = new RegExp(`^${CALL_HEADER}: (\\d+)`, 'im');
const requestsSent = new WeakMap<object, number>();
const sentOnUsedConnection = new Map<string, boolean>();
let calls = 0;
subscribe('undici:client:sendHeaders', (message) => {
  const { headers, socket } = message as { headers: unknown; socket: object };
  const earlier = requestsSent.get(socket) ?? 0;
  requestsSent.set(socket, earlier + 1);
  const number = CALL_NUMBER.exec(String(headers))?.[1];
  if (number !== undefined) sentOnUsedConnection.set(number, earlier > 0);
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface PopAnswer {
  leaseId: string;
  messages: Array<DeliveredMessage & { id: string }>;
}

/**
 * A small mixed workload over HTTP, as real clients would run it: one
 * producer per partition pushing in order and retrying each message with the
 * same transactionId until it is answered 201, and consumers long-polling,
 * renewing, and acking (or now and then nacking) with the lease. Everything
 * they are told goes into the ledger.
 */
export class Workload {
  readonly ledger = new Ledger();
  readonly calls: Call[] = [];
  private stopped = false;
  private readonly loops: Array<Promise<void>> = [];
  private producers: Promise<void> = Promise.resolve();

  constructor(private readonly options: WorkloadOptions) {}

  get acksSucceeded(): number {
    return this.ledger.acked.size;
  }

  get pushesAccepted(): number {
    return this.ledger.accepted.size;
  }

  start(): void {
    const producers = Array.from({ length: this.options.partitions }, (_, index) => this.produce(index));
    this.producers = Promise.all(producers).then(() => undefined);
    this.loops.push(...producers);
    for (let index = 0; index < this.options.consumers; index += 1) this.loops.push(this.consume(index));
  }

  /** Resolves when every producer had all its messages answered 201. */
  producersFinished(): Promise<void> {
    return this.producers;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Pushes `count` more messages all at once, one request each, retried like the producers' (no order among them). */
  async burst(count: number, prefix = 'burst'): Promise<void> {
    await Promise.all(
      Array.from({ length: count }, (_, index) =>
        this.pushUntilAccepted(`p${index % this.options.partitions}`, `${prefix}-${index}`, index, index, false),
      ),
    );
  }

  /** Calls answered while `from` ≤ sentAt ≤ `to` (performance.now() times). */
  callsSentBetween(from: number, to: number): Call[] {
    return this.calls.filter((call) => call.sentAt >= from && call.sentAt <= to);
  }

  private async produce(index: number): Promise<void> {
    const partition = `p${index}`;
    for (let n = 0; n < this.options.messagesPerPartition && !this.stopped; n += 1) {
      await this.pushUntilAccepted(partition, `${partition}-${n}`, n, index);
      await sleep(this.options.pushIntervalMs ?? 0);
    }
  }

  private async pushUntilAccepted(
    partition: string,
    transactionId: string,
    n: number,
    client: number,
    inOrder = true,
  ): Promise<void> {
    const { queue } = this.options;
    if (inOrder) this.ledger.sending(`producer of ${partition}`, transactionId);
    let broker = client % this.options.brokers.length;
    while (!this.stopped) {
      const call = await this.call(broker, 'push', 'POST', '/api/v1/push', {
        items: [{ queue, partition, payload: { n }, transactionId }],
      });
      if (call.status === 201) {
        this.ledger.pushAccepted(partition, transactionId);
        return;
      }
      broker = this.next(broker, call);
      await sleep(50);
    }
  }

  private async consume(index: number): Promise<void> {
    const { queue, leaseSeconds } = this.options;
    const query = new URLSearchParams({
      wait: 'true',
      timeout: String(this.options.popTimeoutMs ?? 500),
      batch: String(this.options.batch ?? 5),
      leaseSeconds: String(leaseSeconds),
    });
    let broker = index % this.options.brokers.length;
    let batches = 0;
    while (!this.stopped) {
      const pop = await this.call(broker, 'pop', 'GET', `/api/v1/pop/queue/${queue}?${query.toString()}`);
      if (pop.status === 204) continue;
      if (pop.status !== 200) {
        broker = this.next(broker, pop);
        await sleep(100);
        continue;
      }
      const { leaseId, messages } = pop.body as PopAnswer;
      this.ledger.delivered(leaseId, messages);
      batches += 1;
      if (this.options.extend) {
        await this.call(broker, 'extend', 'POST', `/api/v1/lease/${leaseId}/extend`, { seconds: leaseSeconds });
      }
      const nack = this.options.nackEvery !== undefined && batches % this.options.nackEvery === 0;
      const ack = await this.call(broker, 'ack', 'POST', '/api/v1/ack/batch', {
        acknowledgments: messages.map((message) => ({
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId,
          status: nack ? 'failed' : 'completed',
          ...(nack ? { error: 'nacked by the workload' } : {}),
        })),
      });
      if (ack.status === 200 && !nack) {
        (ack.body as Array<{ success: boolean }>).forEach((result, position) => {
          if (result.success) this.ledger.ackSucceeded(messages[position].transactionId);
        });
      }
      if (ack.status !== 200) broker = this.next(broker, ack);
    }
  }

  /** Another broker after a failure that says this one is gone or going. */
  private next(broker: number, call: Call): number {
    const gone = call.error !== undefined || call.status === 503;
    return gone ? (broker + 1) % this.options.brokers.length : broker;
  }

  private async call(broker: number, route: Route, method: string, path: string, body?: unknown): Promise<Call> {
    const sentAt = performance.now();
    const call: Call = { route, broker, sentAt, answeredAt: sentAt };
    const number = String((calls += 1));
    try {
      const response = await fetch(`${this.options.brokers[broker]}${path}`, {
        method,
        headers: {
          [this.options.tenantHeader]: this.options.tenant,
          'content-type': 'application/json',
          [CALL_HEADER]: number,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
      });
      const text = await response.text();
      call.status = response.status;
      call.connection = response.headers.get('connection');
      call.body = text ? JSON.parse(text) : undefined;
    } catch (error) {
      // fetch's errors come from Node's own realm, not the test's: read them as shapes, not instances.
      const { message, cause } = (typeof error === 'object' && error !== null ? error : {}) as Partial<Error>;
      call.error = `${message ?? String(error)}${cause ? ` (${inspect(cause)})` : ''}`;
    }
    call.answeredAt = performance.now();
    call.reusedConnection = sentOnUsedConnection.get(number);
    sentOnUsedConnection.delete(number);
    this.calls.push(call);
    return call;
  }
}
