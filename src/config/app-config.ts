export type JwtAlgorithm = 'HS256' | 'HS384' | 'HS512' | 'RS256' | 'RS384' | 'RS512';

export interface DatabaseConfig {
  /** Unset means: run the embedded PostgreSQL in DATA_DIR. */
  url: string | undefined;
  dataDir: string;
  poolSize: number;
  acquireTimeoutMs: number;
  statementTimeoutMs: number;
  /** How long start-up waits for the database to answer before it gives up. */
  connectTimeoutMs: number;
}

export interface JwtConfig {
  enabled: boolean;
  algorithm: JwtAlgorithm;
  secret: string | undefined;
  publicKey: string | undefined;
  /** Only `npm run token` reads it (JWT_PRIVATE_KEY), to sign RS* tokens. */
  privateKey?: string;
  issuer: string | undefined;
  audience: string | undefined;
  clockToleranceSeconds: number;
  tenantClaim: string;
  /** A token without the tenant claim is refused (403) instead of acting in the header's or the default tenant. */
  requireTenant: boolean;
}

export interface HttpConfig {
  /** Longest wait for a request's headers; a slower client is disconnected. */
  headersTimeoutMs: number;
  /** Longest wait for a whole request (headers and body); the answer may take longer. */
  requestTimeoutMs: number;
  /** How long an idle kept-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** Connections open at once; more are closed as they arrive. */
  maxConnections: number;
}

/** Per route class: requests per second per tenant, for the whole deployment; 0 means no limit. */
export interface RateLimits {
  renew: number;
  consume: number;
  produce: number;
  manage: number;
}

/** Most rows of each kind one tenant may have; 0 means no limit. */
export interface TenantQuotas {
  queues: number;
  partitions: number;
  consumerGroups: number;
}

export interface LimitsConfig {
  /** Largest payload of one message, as JSON. */
  messageMaxBytes: number;
  /** Most JSON values (objects, arrays, strings, numbers, literals) in one request body. */
  bodyMaxJsonValues: number;
  /** Largest inflated/compressed ratio of a compressed body. */
  bodyMaxInflateRatio: number;
  /** Largest answer of a pop, a dead-letter page or a queue's resources, roughly. */
  responseMaxBytes: number;
  /** Long polls one tenant may have parked, for the whole deployment. */
  popMaxWaitingPerTenant: number;
  /** Pooled connections one tenant may hold at once, so others always get one. */
  tenantMaxConnections: number;
  rateLimits: RateLimits;
  quotas: TenantQuotas;
}

/** The retention job (RetentionService) and the defaults of queues that set no retention of their own. */
export interface RetentionConfig {
  /** How often each queue is looked at; 0 turns the job off in this process. */
  intervalMs: number;
  /** Most rows one retention statement deletes. */
  batchSize: number;
  /** completedRetentionSeconds of queues that set none; 0 keeps consumed messages. */
  completedSeconds: number;
  /** retentionSeconds of queues that set none; 0 keeps unconsumed messages. */
  pendingSeconds: number;
  /** dlqRetentionSeconds of queues that set none; 0 keeps dead letters. */
  deadLetterSeconds: number;
  /** An empty partition is removed this long after its last push. */
  emptyPartitionGraceSeconds: number;
}

export interface AppConfig {
  port: number;
  host: string;
  bodyLimitBytes: number;
  shutdownTimeoutMs: number;
  workers: number;
  /**
   * How often this process tells the database it is alive and counts the
   * live brokers, whose share of each per-tenant limit it enforces; 0: it
   * neither registers nor counts, and enforces the whole limits alone.
   */
  brokerHeartbeatMs: number;
  database: DatabaseConfig;
  jwt: JwtConfig;
  tenantHeader: string | undefined;
  leaseMaxExtendSeconds: number | undefined;
  /** How far past its claim a lease may run, renewals included; undefined for no ceiling. */
  leaseMaxTotalSeconds: number | undefined;
  /** Renewal statements allowed in flight at once; further renewals are grouped behind them. */
  leaseRenewalConcurrency: number;
  /** Most renewals one statement may carry. */
  leaseRenewalBatchSize: number;
  /** Most lease rows (partitions) one renewal statement may carry, as far as they are known. */
  leaseRenewalBatchRows: number;
  http: HttpConfig;
  limits: LimitsConfig;
  retention: RetentionConfig;
  /** Serve Swagger UI and the OpenAPI document (/docs, /docs-json). */
  docsEnabled: boolean;
  /** Serve the web console at /console. */
  consoleEnabled: boolean;
  metrics: MetricsConfig;
  log: LogConfig;
  defaultTenantId: string;
}

/** Injection token for the validated configuration. */
export const APP_CONFIG = Symbol('APP_CONFIG');

export interface MetricsConfig {
  /** Serve /metrics at all. */
  enabled: boolean;
  /** A port of its own for /metrics (not on the API port); undefined: the API port. */
  port: number | undefined;
  /** Bearer token /metrics requires on the API port when auth is on. */
  token: string | undefined;
  /** Label per-queue series with the tenant id (one series per tenant and queue). */
  tenantLabels: boolean;
  /** Most (queue, consumer group) rows the scrape-time depth and lag query reads. */
  maxQueueSeries: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface LogConfig {
  level: LogLevel;
  /** `json`: one JSON object per line; `pretty`: coloured lines for a terminal (needs the dev dependency pino-pretty). */
  format: 'json' | 'pretty';
  /** Log one line per HTTP request. */
  requests: boolean;
}
