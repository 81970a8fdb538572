import { consume, type ConsumeHandler, type ConsumeOptions } from './consume';
import { LeaseholdError } from './leasehold-error';
import { linkSignals } from './signals';
import { Transaction } from './transaction';
import type {
  AckBatchOptions,
  AckBatchRequest,
  AckResult,
  Acknowledgment,
  ConfigureRequest,
  ConfigureResponse,
  ExtendResponse,
  ExtendResult,
  LeaseholdClientOptions,
  LeaseStatus,
  Message,
  PopOptions,
  PopResponse,
  PushItem,
  PushRequest,
  PushResult,
  QueueOptions,
  RequestOptions,
  TraceOptions,
  TraceRequest,
  TraceResult,
  TransactionRequest,
  TransactionResult,
} from './types';

const DEFAULT_TENANT_HEADER = 'x-queen-tenant';
const DEFAULT_TIMEOUT_MS = 30_000;
const BROKER_LONG_POLL_DEFAULT_MS = 30_000;
const DEFAULT_EXTEND_SECONDS = 60;
const MAX_INT32 = 2_147_483_647;
const RENEW_AFTER_HEADER = 'leasehold-renew-after';
const DEADLINE_AFTER_HEADER = 'leasehold-deadline-after';
const LEASE_STATUS_HEADER = 'leasehold-lease-status';

type HttpMethod = 'GET' | 'POST';

interface Exchange<T> {
  body: T;
  headers: Headers;
}

export class LeaseholdClient {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;

  constructor(options: LeaseholdClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.headers = { accept: 'application/json' };
    if (options.token !== undefined) {
      this.headers['authorization'] = `Bearer ${options.token}`;
    }
    if (options.tenant !== undefined) {
      this.headers[(options.tenantHeader ?? DEFAULT_TENANT_HEADER).toLowerCase()] = options.tenant;
    }
  }

  async push<T>(items: PushItem<T>[], options?: RequestOptions): Promise<PushResult[]> {
    const body: PushRequest<T> = { items };
    return this.request<PushResult[]>('POST', '/api/v1/push', body, options);
  }

  async pop<T = unknown>(queue: string, options: PopOptions = {}): Promise<PopResponse<T> | null> {
    const { partition, signal, ...query } = options;
    let path = `/api/v1/pop/queue/${encodeURIComponent(queue)}`;
    if (partition !== undefined) {
      path += `/partition/${encodeURIComponent(partition)}`;
    }
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined) {
        search.set(key, String(value));
      }
    }
    const queryString = search.toString();
    if (queryString !== '') {
      path += `?${queryString}`;
    }
    // A long poll is silent for its whole wait by design: that must not count as a timeout.
    const longPollMs = query.wait ? (query.timeout ?? BROKER_LONG_POLL_DEFAULT_MS) : 0;
    return this.request<PopResponse<T> | null>('GET', path, undefined, { signal }, longPollMs);
  }

  // HTTP 200 is not success: an unknown, expired, released or foreign lease answers 200 with
  // renewed 0, which is reported as lost.
  async extend(
    leaseId: string,
    seconds: number = DEFAULT_EXTEND_SECONDS,
    options?: RequestOptions,
  ): Promise<ExtendResult> {
    // The route never answers 400: a fraction or an out-of-range value silently becomes 60.
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_INT32) {
      throw new RangeError(`lease seconds must be an integer from 1 to ${MAX_INT32}, got ${seconds}`);
    }
    const { body: answer, headers } = await this.exchange<ExtendResponse>(
      'POST',
      `/api/v1/lease/${encodeURIComponent(leaseId)}/extend`,
      { seconds },
      options,
    );
    // Rows another transaction held were left, not waited for: the lease is live, renew again soon.
    const busy = headers.get(LEASE_STATUS_HEADER)?.trim().toLowerCase() === 'busy';
    const lost = answer.renewed === 0 && !busy;
    // Each hint belongs to one outcome: one that contradicts `renewed` is not trusted.
    return {
      ...answer,
      lost,
      busy,
      expiry: answer.renewed > 0 && answer.expiresAt !== null ? new Date(answer.expiresAt) : null,
      renewAfterSeconds: lost ? null : hintSeconds(headers.get(RENEW_AFTER_HEADER)),
      deadlineSeconds: answer.renewed > 0 ? hintSeconds(headers.get(DEADLINE_AFTER_HEADER)) : null,
      leaseStatus: lost ? leaseStatus(headers.get(LEASE_STATUS_HEADER)) : null,
    };
  }

  async ack(acknowledgment: Acknowledgment, options?: RequestOptions): Promise<AckResult> {
    const answer = await this.request<AckResult | AckResult[]>('POST', '/api/v1/ack', acknowledgment, options);
    // The contract describes both ack routes as answering an array; take the single entry.
    const result = Array.isArray(answer) ? answer[0] : answer;
    if (result === undefined) {
      throw new Error('the broker answered an ack with no result');
    }
    return result;
  }

  async ackBatch(acknowledgments: Acknowledgment[], options: AckBatchOptions = {}): Promise<AckResult[]> {
    const { consumerGroup, signal } = options;
    const body: AckBatchRequest = { acknowledgments };
    if (consumerGroup !== undefined) {
      body.consumerGroup = consumerGroup;
    }
    return this.request<AckResult[]>('POST', '/api/v1/ack/batch', body, {
      signal,
    });
  }

  async nack(
    acknowledgment: Omit<Acknowledgment, 'status' | 'error'>,
    error: string,
    options?: RequestOptions,
  ): Promise<AckResult> {
    return this.ack({ ...acknowledgment, status: 'failed', error }, options);
  }

  async nackBatch(
    acknowledgments: Omit<Acknowledgment, 'status' | 'error'>[],
    error: string,
    options?: AckBatchOptions,
  ): Promise<AckResult[]> {
    return this.ackBatch(
      acknowledgments.map((acknowledgment) => ({
        ...acknowledgment,
        status: 'failed',
        error,
      })),
      options,
    );
  }

  /**
   * Records what a worker did with a message, to read back by message or by name (`/api/v1/traces`). Throws like any
   * request; `consume` hands handlers a `trace` that never does.
   */
  async trace(
    message: Pick<Message, 'transactionId' | 'partitionId' | 'consumerGroup'>,
    data: unknown,
    options: TraceOptions & RequestOptions = {},
  ): Promise<TraceResult> {
    const { eventType, traceNames, consumerGroup, signal } = options;
    const body: TraceRequest = { transactionId: message.transactionId, partitionId: message.partitionId, data };
    const group = consumerGroup ?? message.consumerGroup ?? undefined;
    if (group !== undefined) body.consumerGroup = group;
    if (eventType !== undefined) body.eventType = eventType;
    if (traceNames !== undefined) body.traceNames = traceNames;
    return this.request<TraceResult>('POST', '/api/v1/traces', body, { signal });
  }

  /** A builder of acks and pushes committed together: see Transaction. */
  transaction(): Transaction {
    return new Transaction(this);
  }

  /** The route itself: answers rolled-back transactions too (success false), rather than throwing. */
  async sendTransaction(request: TransactionRequest, options?: RequestOptions): Promise<TransactionResult> {
    return this.request<TransactionResult>('POST', '/api/v1/transaction', request, options);
  }

  async configure(queue: string, options: QueueOptions, requestOptions?: RequestOptions): Promise<ConfigureResponse> {
    const body: ConfigureRequest = { queue, options };
    return this.request<ConfigureResponse>('POST', '/api/v1/configure', body, requestOptions);
  }

  async consume<T = unknown>(
    queue: string,
    handler: ConsumeHandler<T>,
    options: Omit<ConsumeOptions<T>, 'client'> = {},
  ): Promise<void> {
    return consume<T>(queue, handler, { ...options, client: this });
  }

  private async request<T>(
    method: HttpMethod,
    path: string,
    body: unknown,
    options: RequestOptions = {},
    extraTimeoutMs = 0,
  ): Promise<T> {
    const answer = await this.exchange<T>(method, path, body, options, extraTimeoutMs);
    return answer.body;
  }

  private async exchange<T>(
    method: HttpMethod,
    path: string,
    body: unknown,
    options: RequestOptions = {},
    extraTimeoutMs = 0,
  ): Promise<Exchange<T>> {
    const headers = { ...this.headers };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
    }
    const link = linkSignals([options.signal], this.timeoutMs + extraTimeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? null : JSON.stringify(body),
        signal: link.signal,
      });
      text = await response.text();
    } finally {
      link.unlink();
    }
    if (!response.ok) {
      throw new LeaseholdError(response.status, errorText(text, response.statusText), method, path);
    }
    return {
      body: (text === '' ? null : JSON.parse(text)) as T,
      headers: response.headers,
    };
  }
}

// Plain decimal seconds only: Number() alone would also read '' as 0 and take '0x1f' or '1e9'.
function hintSeconds(value: string | null): number | null {
  const text = value?.trim() ?? '';
  if (!/^\d+(?:\.\d+)?$/.test(text)) {
    return null;
  }
  const seconds = Number(text);
  return Number.isFinite(seconds) ? seconds : null;
}

function leaseStatus(value: string | null): LeaseStatus | null {
  const status = value?.trim().toLowerCase();
  return status === 'expired' || status === 'unknown' ? status : null;
}

function errorText(text: string, statusText: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && 'error' in parsed) {
      const { error } = parsed;
      if (typeof error === 'string') {
        return error;
      }
    }
  } catch {
    // Not JSON: a proxy or load balancer answered instead of the broker.
  }
  return text.trim() || statusText;
}
