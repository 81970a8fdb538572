/** Wire shapes of the routes the console calls: the same as any client's (docs/api.md). */
export type Role = 'read-only' | 'write-only' | 'read-write' | 'admin';

export interface WhoAmI {
  tenant: string;
  roles: Role[];
  subject: string | null;
  authEnabled: boolean;
  expiresAt: string | null;
}

export interface QueueSummary {
  name: string;
  options: Record<string, unknown>;
  retention: Record<string, number | boolean>;
  namespace: string | null;
  task: string | null;
  partitionCount: number;
  messages: number;
  pending: number;
  retained: number;
  deadLetters: number;
  consumerGroupCount: number;
  createdAt: string;
  updatedAt: string;
}

export interface QueueList {
  queues: QueueSummary[];
  next: string | null;
  /** How long the tenant's oldest due retention work has waited (docs/operations.md). */
  retentionLagSeconds: number;
}

export interface PartitionStats {
  id: string;
  name: string;
  messages: number;
  createdAt: string;
}

export interface QueueDetail extends QueueSummary {
  partitions: PartitionStats[];
  partitionsTruncated: boolean;
  /** The `after` of the next page of partitions; null on the last. */
  partitionsNext: string | null;
  consumerGroups: Array<{ name: string; lag: number; liveLeases: number }>;
}

export interface GroupSummary {
  name: string;
  queueName: string;
  partitions: number;
  partitionsWithLag: number;
  totalLag: number;
  maxTimeLag: number;
  liveLeases: number;
  subscriptionMode: 'all' | 'new';
  state: 'Lagging' | 'Stable';
  subscriptionTimestamp: string | null;
  createdAt: string;
}

export interface LiveLease {
  consumerGroup: string;
  partitionId: string;
  partition: string;
  leaseIdHint: string;
  epoch: number;
  messages: number;
  deliveryAttempt: number;
  expiresAt: string;
  remainingMs: number;
  deadline: string | null;
  renewals: number;
  lastRenewedAt: string | null;
  lastRenewalSlackMs: number | null;
}

export interface LeaseList {
  now: string;
  leases: LiveLease[];
  truncated: boolean;
}

export type MessageStatus = 'pending' | 'leased' | 'completed' | 'dead_letter';

export interface ListedMessage {
  id: string;
  transactionId: string;
  traceId: string | null;
  data: unknown;
  producerSub: string | null;
  createdAt: string;
  partitionId: string;
  partition: string;
  /** Always null in a listing. */
  leaseId: null;
  consumerGroup: string;
  deliveryAttempt: number;
  leaseEpoch: number;
  status: MessageStatus;
  /** Only when an encrypted payload could not be decrypted; data is then null. */
  error?: string;
}

export interface MessagePage {
  messages: ListedMessage[];
  next: string | null;
}

export interface MessageDetail {
  queue: string;
  partition: string;
  partitionId: string;
  id: string;
  transactionId: string;
  traceId: string | null;
  data: unknown;
  producerSub: string | null;
  createdAt: string;
  groups: Array<{
    consumerGroup: string;
    status: MessageStatus;
    deliveryAttempt: number;
    leaseActive: boolean;
    leaseExpiresAt: string | null;
    leaseEpoch: number;
  }>;
  deadLetters: Array<{ consumerGroup: string; errorMessage: string | null; retryCount: number; failedAt: string }>;
}

/** GET /traces/:partitionId/:transactionId keeps Queen's snake_case keys. */
export interface MessageTrace {
  id: string;
  event_type: string;
  data: unknown;
  consumer_group: string;
  worker_id: string;
  created_at: string;
  trace_names: string[];
}

export interface DeadLetter {
  id: string;
  messageId: string;
  transactionId: string;
  traceId: string | null;
  data: unknown;
  producerSub: string | null;
  /** Only when an encrypted payload could not be decrypted; data is then null. */
  error?: string;
  errorMessage: string | null;
  retryCount: number;
  queue: string;
  partition: string;
  partitionId: string;
  consumerGroup: string;
  createdAt: string;
  failedAt: string;
}

export interface DeadLetterPage {
  messages: DeadLetter[];
  total: number;
}

export interface QuotaUse {
  quota: 'queues' | 'partitions' | 'consumerGroups' | 'storedBytes' | 'storedMessages';
  variable: string;
  /** null: not counted (a counted quota that is off). */
  used: number | null;
  /** null: no quota. */
  limit: number | null;
}

export interface QuotaUsage {
  quotas: QuotaUse[];
}

export interface MaintenanceState {
  maintenanceMode: boolean;
  popMaintenanceMode: boolean;
}

const TOKEN_KEY = 'leasehold.console.token';

/** Session storage only: gone with the tab, never written to disk by the browser's profile like local storage. */
export const tokenStore = {
  get: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  set: (token: string): void => sessionStorage.setItem(TOKEN_KEY, token),
  clear: (): void => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let onUnauthorized: (error: ApiError) => void = () => undefined;
export function whenUnauthorized(handler: (error: ApiError) => void): void {
  onUnauthorized = handler;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = tokenStore.get();
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'the broker cannot be reached');
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const error = (parsed as { error?: unknown } | undefined)?.error;
    const failure = new ApiError(response.status, typeof error === 'string' ? error : `HTTP ${response.status}`);
    if (response.status === 401 && token) onUnauthorized(failure);
    throw failure;
  }
  return parsed as T;
}

export const q = encodeURIComponent;

export function query(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter(([, value]) => value !== undefined && value !== '');
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}` : '';
}

export type HistoryRange = 'hour' | 'day' | 'week';

export interface HistoryPoint {
  at: string;
  pushed: number;
  popped: number;
  acked: number;
  deadLettered: number;
  maxWaitSeconds: number | null;
  /** Queue history only: messages waiting at the step's last activity. */
  lag?: number | null;
}

export interface History {
  range: HistoryRange;
  stepSeconds: number;
  from: string;
  to: string;
  points: HistoryPoint[];
}
