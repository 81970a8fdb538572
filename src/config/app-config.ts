import type { EncryptionKey } from '../encryption/encryption-keys';
import { JwtAlgorithm } from './jwt-algorithms';

export interface DatabaseConfig {
  /** Unset means: run the embedded PostgreSQL in DATA_DIR. */
  url: string | undefined;
  dataDir: string;
  poolSize: number;
  /** Connections all broker processes on the database may hold together, LISTEN connections included; 0: no budget. */
  connectionBudget: number;
  acquireTimeoutMs: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
}

/** Keys of an identity provider, fetched as a set and held between fetches. */
export interface JwksConfig {
  url: string;
  /** How long a fetched set is used before it is fetched again (in the background: requests do not wait). */
  cacheMs: number;
  /** Least time between two fetches, however many unknown key ids arrive. */
  refetchIntervalMs: number;
  /** Longest a fetch may take, answer included. */
  timeoutMs: number;
}

export interface JwtConfig {
  enabled: boolean;
  /** What `npm run token` signs with; one of `algorithms`. */
  algorithm: JwtAlgorithm;
  /** A token whose header names another algorithm is refused before any key is looked up. */
  algorithms: JwtAlgorithm[];
  secret: string | undefined;
  publicKey: string | undefined;
  jwks: JwksConfig | undefined;
  /** Only `npm run token` reads it (JWT_PRIVATE_KEY), to sign RS* tokens. */
  privateKey?: string;
  issuer: string | undefined;
  audience: string | undefined;
  clockToleranceSeconds: number;
  /** A claim name, or a dotted path into nested claims (`org.id`). */
  tenantClaim: string;
  /** Like tenantClaim; undefined reads `role` (a string) and `roles` (an array). */
  rolesClaim: string | undefined;
  /** A token without the tenant claim is refused (403) instead of acting in the header's or the default tenant. */
  requireTenant: boolean;
}

export interface HttpConfig {
  headersTimeoutMs: number;
  /** Covers receiving headers and body; the answer may take longer. */
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  /** Connections carrying one tenant's requests at once, in this process. */
  tenantMaxConnections: number;
  /** One tenant's requests in flight at once (past authentication, not yet answered), in this process. */
  tenantMaxRequests: number;
  /** A body arriving slower than this on average, once the grace has passed, is cut: 408. */
  bodyMinBytesPerSecond: number;
  bodyMinRateGraceMs: number;
  /** Origins (as browsers send them) whose pages may call the API; every other site's requests are refused. */
  allowedOrigins: string[];
}

/** Per route class: requests per second per tenant, for the whole deployment; 0 means no limit. */
export interface RateLimits {
  renew: number;
  consume: number;
  produce: number;
  manage: number;
}

/** Most rows of each kind one tenant may have, and most it may store; 0 means no limit. */
export interface TenantQuotas {
  queues: number;
  partitions: number;
  consumerGroups: number;
  /** Payload bytes of its messages and dead letters, and its stream state. */
  storedBytes: number;
  /** Its messages, dead letters and stream state entries. */
  storedMessages: number;
}

export interface LimitsConfig {
  messageMaxBytes: number;
  bodyMaxJsonValues: number;
  bodyMaxInflateRatio: number;
  responseMaxBytes: number;
  /** Parked long polls, for the whole deployment. */
  popMaxWaitingPerTenant: number;
  /** Listings and browsing one tenant runs at once in this process; more are refused, not queued. */
  tenantMaxHeavyReads: number;
  /** So other tenants always get a pooled connection. */
  tenantMaxConnections: number;
  /** A transaction's operations, each ack and each push item counting one. */
  transactionMaxOperations: number;
  rateLimits: RateLimits;
  quotas: TenantQuotas;
}

export interface RetentionConfig {
  /** 0 turns the retention job off in this process. */
  intervalMs: number;
  batchSize: number;
  /** completedRetentionSeconds of queues that set none; 0 keeps consumed messages. */
  completedSeconds: number;
  /** retentionSeconds of queues that set none; 0 keeps unconsumed messages. */
  pendingSeconds: number;
  /** dlqRetentionSeconds of queues that set none; 0 keeps dead letters. */
  deadLetterSeconds: number;
  emptyPartitionGraceSeconds: number;
  /** No caller without the role that may clear a queue sets a retention rule shorter than this; 0: no floor. */
  minSeconds: number;
}

export interface HistoryConfig {
  /** How often this process adds its counts to the minute buckets; 0 keeps no history. */
  flushMs: number;
  /** Buckets older than this are deleted by the retention job. */
  retentionDays: number;
}

export interface AppConfig {
  port: number;
  host: string;
  bodyLimitBytes: number;
  shutdownTimeoutMs: number;
  /** How long kept-alive connections with no request stay open once draining began, for requests already on their way. */
  shutdownIdleGraceMs: number;
  workers: number;
  /** Registers this broker and counts live ones to enforce its share of per-tenant limits; 0: no split. */
  brokerHeartbeatMs: number;
  database: DatabaseConfig;
  jwt: JwtConfig;
  tenantHeader: string | undefined;
  leaseMaxExtendSeconds: number | undefined;
  /** How far past its claim a lease may run, renewals included; undefined for no ceiling. */
  leaseMaxTotalSeconds: number | undefined;
  /** Renewal statements in flight at once; further renewals are grouped behind them. */
  leaseRenewalConcurrency: number;
  leaseRenewalBatchSize: number;
  /** Most lease rows (partitions) per renewal statement, as far as they are known. */
  leaseRenewalBatchRows: number;
  http: HttpConfig;
  limits: LimitsConfig;
  retention: RetentionConfig;
  history: HistoryConfig;
  /** Keys for queues with encryptionEnabled: the first seals new payloads, every one opens stored ones. */
  encryptionKeys: EncryptionKey[];
  docsEnabled: boolean;
  consoleEnabled: boolean;
  metrics: MetricsConfig;
  log: LogConfig;
  defaultTenantId: string;
}

export const APP_CONFIG = Symbol('APP_CONFIG');

export interface MetricsConfig {
  enabled: boolean;
  /** A separate port for /metrics; undefined: the API port. */
  port: number | undefined;
  /** Bearer token for /metrics on the API port when auth is on. */
  token: string | undefined;
  tenantLabels: boolean;
  maxQueueSeries: number;
  /** Queue series one tenant may hold, so that no tenant takes the others' share of maxQueueSeries. */
  maxQueueSeriesPerTenant: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface LogConfig {
  level: LogLevel;
  /** `pretty` needs the dev dependency pino-pretty. */
  format: 'json' | 'pretty';
  requests: boolean;
}
