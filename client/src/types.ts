export type BrokerTimestamp = string;

export interface LeaseholdClientOptions {
  baseUrl: string;
  token?: string | undefined;
  // The broker honours it only behind a trusted gateway (TENANT_HEADER); a token's tenant wins.
  tenant?: string | undefined;
  tenantHeader?: string | undefined;
  timeoutMs?: number | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal | undefined;
}

export interface PushItem<T = unknown> {
  queue: string;
  partition?: string;
  payload: T;
  transactionId?: string;
  traceId?: string;
}

export interface PushRequest<T = unknown> {
  items: PushItem<T>[];
}

export type PushStatus = 'queued' | 'duplicate' | 'failed';

export interface PushResult {
  index: number;
  message_id: string | null;
  transaction_id: string;
  queueName: string;
  status: PushStatus;
  error?: string;
}

export type SubscriptionMode = 'all' | 'new' | 'from_beginning' | 'new-only' | 'now';

export interface PopOptions extends RequestOptions {
  partition?: string | undefined;
  batch?: number | undefined;
  partitions?: number | undefined;
  wait?: boolean | undefined;
  timeout?: number | undefined;
  leaseSeconds?: number | undefined;
  consumerGroup?: string | undefined;
  subscriptionMode?: SubscriptionMode | undefined;
  subscriptionFrom?: string | undefined;
  autoAck?: boolean | undefined;
}

export interface Message<T = unknown> {
  id: string;
  transactionId: string;
  traceId: string | null;
  data: T;
  producerSub: string | null;
  createdAt: BrokerTimestamp;
  partitionId: string;
  partition: string;
  leaseId: string | null;
  consumerGroup: string | null;
  deliveryAttempt: number;
  // The fencing token of this message's partition claim: it grows with every claim, so a
  // store that refuses a lower one than it has seen shuts out a holder whose lease ran out.
  // Absent from brokers that predate it.
  leaseEpoch: number;
  // Only when the stored payload of an encrypted queue could not be decrypted: data is then null.
  error?: string;
}

export interface ClaimedPartition {
  partitionId: string;
  partition: string;
  leaseEpoch: number;
  // How many of this answer's messages came from the partition.
  messages: number;
}

export interface PopResponse<T = unknown> {
  success: boolean;
  queue: string;
  partition: string;
  partitionId: string;
  leaseId: string;
  consumerGroup: string | null;
  messages: Message<T>[];
  partitionsClaimed: number;
  // In claim order. Absent from brokers that predate fencing epochs.
  claimedPartitions: ClaimedPartition[];
}

export interface ExtendResponse {
  leaseId: string;
  success: boolean;
  renewed: number;
  newExpiresAt: BrokerTimestamp | null;
  expiresAt: BrokerTimestamp | null;
  lease_expires_at: BrokerTimestamp | null;
}

// 'expired': the lease ran out unrenewed and nobody has claimed it since. 'unknown': released
// by an ack or a nack, claimed again, never issued, or another tenant's.
export type LeaseStatus = 'expired' | 'unknown';

export interface ExtendResult extends ExtendResponse {
  // renewed === 0: an HTTP 200 that renewed nothing is a lost lease, not a success, unless busy.
  lost: boolean;
  // Leasehold-Lease-Status: busy. Rows of the lease were held by another transaction and left as
  // they were (renewed counts the others, possibly 0): the lease is live, renew again after
  // renewAfterSeconds.
  busy: boolean;
  // By the broker's database clock: compare it with nothing on this machine.
  expiry: Date | null;
  // The hints below are seconds counted from the broker's answer, null when it sent none.
  // Renew again after this long; null also once renewing can extend the lease no further.
  renewAfterSeconds: number | null;
  // Time left before the broker's ceiling on total lease length; no renewal reaches past it.
  deadlineSeconds: number | null;
  // Only on a lost lease, and only from a broker that says why.
  leaseStatus: LeaseStatus | null;
}

export type AckStatus = 'completed' | 'success' | 'acked' | 'ok' | 'retry' | 'dlq' | 'failed' | 'nack';

export interface Acknowledgment {
  transactionId: string;
  partitionId: string;
  status?: AckStatus;
  consumerGroup?: string | null;
  // Without it the broker skips the lease check and can move the cursor under another worker.
  leaseId?: string;
  // The message's leaseEpoch: the broker refuses the ack once another claim has followed.
  leaseEpoch?: number;
  error?: string;
}

export interface AckBatchRequest {
  consumerGroup?: string | null;
  acknowledgments: Acknowledgment[];
}

export interface AckResult {
  index: number;
  transactionId: string;
  success: boolean;
  error: string | null;
  leaseReleased: boolean;
  dlq: boolean;
}

export interface TransactionAckOperation extends Acknowledgment {
  type: 'ack';
}

export interface TransactionPushOperation<T = unknown> {
  type: 'push';
  items: PushItem<T>[];
}

export type TransactionOperation = TransactionAckOperation | TransactionPushOperation;

export interface TransactionRequest {
  operations: TransactionOperation[];
  requiredLeases?: string[];
}

export type TransactionFailureReason =
  'bad_request' | 'ack_rejected' | 'lease_lost' | 'duplicate' | 'payload_too_large' | 'db_error';

export type TransactionOperationResult =
  ({ type: 'ack' } & AckResult) | { index: number; type: 'push'; success: boolean; items: PushResult[] };

export interface TransactionResult {
  transactionId: string;
  success: boolean;
  // Only when success is false.
  reason?: TransactionFailureReason;
  error?: string;
  results: TransactionOperationResult[];
}

export interface AckBatchOptions extends RequestOptions {
  consumerGroup?: string | null | undefined;
}

export interface QueueOptions {
  leaseTime?: number;
  retryLimit?: number;
  deadLetterQueue?: boolean;
  dlqAfterMaxRetries?: boolean;
  /** Milliseconds. */
  retryDelay?: number;
  delayedProcessing?: number;
  windowBuffer?: number;
  priority?: number;
  // The retention ones, in seconds: null resets one to the broker's default.
  completedRetentionSeconds?: number | null;
  retentionEnabled?: boolean | null;
  retentionSeconds?: number | null;
  maxWaitTimeSeconds?: number | null;
  ttl?: number | null;
  maxSize?: number | null;
  dlqRetentionSeconds?: number | null;
  encryptionEnabled?: boolean;
  [option: string]: unknown;
}

export interface ConfigureRequest {
  queue: string;
  // "" removes it; null or absent keeps it.
  namespace?: string | null;
  task?: string | null;
  options?: QueueOptions;
}

export interface ConfigureResponse {
  configured: boolean;
  queue: string;
  options: QueueOptions;
}

export interface BrokerErrorBody {
  error: string;
}

/** What a trace records beside its data (POST /api/v1/traces). */
export interface TraceOptions {
  /** A label of your own; the broker's default is `info`. */
  eventType?: string | undefined;
  /** Names to find the trace by later (`GET /api/v1/traces/by-name/:name`), at most 10. */
  traceNames?: string | string[] | undefined;
  /** The group whose worker traces; the message's own group unless given. */
  consumerGroup?: string | undefined;
}

export interface TraceRequest {
  transactionId: string;
  partitionId: string;
  data: unknown;
  consumerGroup?: string;
  eventType?: string;
  traceNames?: string | string[];
}

export interface TraceResult {
  success: true;
  traceId: string;
}
