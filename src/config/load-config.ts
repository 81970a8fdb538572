import { createPublicKey, KeyObject } from 'node:crypto';
import { INT32_MAX } from '../common/input';
import { nearMiss, SETTING_TOLERANCE } from '../common/near-miss';
import { parseEncryptionKeys } from '../encryption/encryption-keys';
import { AppConfig, JwksConfig, JwtConfig, LogLevel } from './app-config';
import { envFileVariables } from './env-file';
import { isHmac, JWT_ALGORITHMS, JwtAlgorithm, keyMismatch } from './jwt-algorithms';

export const DEFAULT_TENANT_ID = '00000000-0000-0000-0000-000000000001';

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const MIN_SECRET_BYTES = 32;
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** The only reader of the environment; collects all problems so an operator sees them at once, not one per boot. */
export function loadConfig(env: Env = process.env): AppConfig {
  const problems: string[] = [];
  const reader = new EnvReader(env, problems);

  const jwt = jwtSettings(reader, problems);

  const tenantHeader = reader.string('TENANT_HEADER')?.toLowerCase();
  if (tenantHeader !== undefined && !/^[a-z0-9-]+$/.test(tenantHeader)) {
    problems.push(`TENANT_HEADER must be an HTTP header name, got "${tenantHeader}"`);
  }

  const poolSize = reader.int('DB_POOL_SIZE', 10, 1, 1000);
  const maxConnections = reader.int('HTTP_MAX_CONNECTIONS', 4_096, 1, 1_000_000);
  // A fifth of the pool (at least one connection) stays free of any one tenant.
  const tenantDefault = Math.max(1, poolSize - Math.max(1, Math.floor(poolSize / 5)));

  const maxQueueSeries = reader.int('METRICS_MAX_QUEUE_SERIES', 1_000, 1, 1_000_000);

  const bodyLimitBytes = reader.size('BODY_LIMIT', 16 * 1024 ** 2);
  const responseMaxBytes = reader.size('RESPONSE_MAX_BYTES', 8 * 1024 ** 2);
  // Unset, it follows a smaller body or answer bound; set, a contradiction is a mistake to report.
  const messageMaxBytes = reader.size('MESSAGE_MAX_BYTES', Math.min(4 * 1024 ** 2, bodyLimitBytes, responseMaxBytes));

  const config: AppConfig = {
    port: reader.int('PORT', 6632, 0, 65535),
    host: reader.string('HOST') ?? '0.0.0.0',
    bodyLimitBytes,
    shutdownTimeoutMs: reader.int('SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    shutdownIdleGraceMs: reader.int('SHUTDOWN_IDLE_GRACE_MS', 1_000, 0, 600_000),
    workers: reader.int('WORKERS', 1, 1, 64),
    brokerHeartbeatMs: reader.int('BROKER_HEARTBEAT_MS', 5_000, 0, 60_000),
    database: {
      url: databaseUrl(reader, problems),
      dataDir: reader.string('DATA_DIR') ?? './data/pglite',
      poolSize,
      // PostgreSQL's default max_connections (100) less its 3 reserved, and room for an operator and migrations.
      connectionBudget: reader.int('DB_CONNECTION_BUDGET', 90, 0, 1_000_000),
      acquireTimeoutMs: reader.int('DB_ACQUIRE_TIMEOUT_MS', 2_000, 1, 600_000),
      statementTimeoutMs: reader.int('DB_STATEMENT_TIMEOUT_MS', 5_000, 1, 600_000),
      connectTimeoutMs: reader.int('DB_CONNECT_TIMEOUT_MS', 10_000, 1, 600_000),
    },
    jwt,
    tenantHeader,
    leaseMaxExtendSeconds: reader.optionalInt('LEASE_MAX_EXTEND_SECONDS', 1, INT32_MAX),
    leaseMaxTotalSeconds: reader.optionalInt('LEASE_MAX_TOTAL_SECONDS', 1, INT32_MAX),
    leaseRenewalConcurrency: reader.int('LEASE_RENEWAL_CONCURRENCY', 2, 1, 1000),
    leaseRenewalBatchSize: reader.int('LEASE_RENEWAL_BATCH_SIZE', 256, 1, 10_000),
    leaseRenewalBatchRows: reader.int('LEASE_RENEWAL_BATCH_ROWS', 2_000, 1, 1_000_000),
    http: {
      headersTimeoutMs: reader.int('HTTP_HEADERS_TIMEOUT_MS', 10_000, 1, 600_000),
      requestTimeoutMs: reader.int('HTTP_REQUEST_TIMEOUT_MS', 60_000, 1, 3_600_000),
      keepAliveTimeoutMs: reader.int('HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 3_600_000),
      maxConnections,
      // A quarter each by default: no tenant's requests can hold the connections every other tenant needs.
      tenantMaxConnections: reader.int(
        'HTTP_TENANT_MAX_CONNECTIONS',
        Math.max(1, Math.floor(maxConnections / 4)),
        1,
        maxConnections,
      ),
      tenantMaxRequests: reader.int(
        'HTTP_TENANT_MAX_REQUESTS',
        Math.max(1, Math.floor(maxConnections / 4)),
        1,
        10_000_000,
      ),
      // Kestrel's defaults: 240 bytes a second on average, after 5 seconds.
      bodyMinBytesPerSecond: reader.int('HTTP_BODY_MIN_BYTES_PER_SECOND', 240, 0, 1_000_000_000),
      bodyMinRateGraceMs: reader.int('HTTP_BODY_MIN_RATE_GRACE_MS', 5_000, 100, 600_000),
      allowedOrigins: allowedOrigins(reader.string('HTTP_ALLOWED_ORIGINS'), problems),
    },
    limits: {
      messageMaxBytes,
      bodyMaxJsonValues: reader.int('BODY_MAX_JSON_VALUES', 500_000, 1, 100_000_000),
      bodyMaxInflateRatio: reader.int('BODY_MAX_INFLATE_RATIO', 100, 1, 100_000),
      responseMaxBytes,
      popMaxWaitingPerTenant: reader.int('POP_MAX_WAITING_PER_TENANT', 1_000, 0, 1_000_000),
      tenantMaxHeavyReads: reader.int('TENANT_MAX_HEAVY_READS', 4, 1, 10_000),
      tenantMaxConnections: reader.int('DB_TENANT_MAX_CONNECTIONS', tenantDefault, 1, poolSize),
      // A pop's largest batch acked, and as many outputs pushed: what a pipeline stage does in one transaction.
      transactionMaxOperations: reader.int('TRANSACTION_MAX_OPERATIONS', 20_000, 1, 100_000),
      rateLimits: {
        renew: reader.int('RATE_LIMIT_RENEW', 1_000, 0, 10_000_000),
        consume: reader.int('RATE_LIMIT_CONSUME', 2_000, 0, 10_000_000),
        produce: reader.int('RATE_LIMIT_PRODUCE', 2_000, 0, 10_000_000),
        manage: reader.int('RATE_LIMIT_MANAGE', 500, 0, 10_000_000),
      },
      quotas: {
        queues: reader.int('TENANT_MAX_QUEUES', 1_000, 0, 100_000_000),
        partitions: reader.int('TENANT_MAX_PARTITIONS', 100_000, 0, 100_000_000),
        consumerGroups: reader.int('TENANT_MAX_CONSUMER_GROUPS', 1_000, 0, 100_000_000),
        storedBytes: reader.size('TENANT_MAX_STORED_BYTES', 10 * 1024 ** 3, 0),
        storedMessages: reader.int('TENANT_MAX_STORED_MESSAGES', 10_000_000, 0, Number.MAX_SAFE_INTEGER),
      },
    },
    retention: {
      intervalMs: reader.int('RETENTION_INTERVAL_MS', 30_000, 0, 86_400_000),
      batchSize: reader.int('RETENTION_BATCH_SIZE', 1_000, 1, 100_000),
      completedSeconds: reader.int('COMPLETED_RETENTION_SECONDS', 3_600, 0, INT32_MAX),
      pendingSeconds: reader.int('RETENTION_SECONDS', 14 * 86_400, 0, INT32_MAX),
      deadLetterSeconds: reader.int('DLQ_RETENTION_SECONDS', 14 * 86_400, 0, INT32_MAX),
      emptyPartitionGraceSeconds: reader.int('EMPTY_PARTITION_GRACE_SECONDS', 3_600, 0, INT32_MAX),
      minSeconds: reader.int('QUEUE_MIN_RETENTION_SECONDS', 0, 0, INT32_MAX),
    },
    history: {
      flushMs: reader.int('HISTORY_FLUSH_MS', 60_000, 0, 3_600_000),
      retentionDays: reader.int('HISTORY_RETENTION_DAYS', 7, 1, 366),
    },
    encryptionKeys: parseEncryptionKeys(
      reader.string('ENCRYPTION_KEYS'),
      reader.string('QUEEN_ENCRYPTION_KEY'),
      problems,
    ),
    docsEnabled: reader.bool('DOCS_ENABLED', true),
    consoleEnabled: reader.bool('CONSOLE_ENABLED', true),
    defaultTenantId: DEFAULT_TENANT_ID,
    metrics: {
      enabled: reader.bool('METRICS_ENABLED', true),
      port: reader.optionalInt('METRICS_PORT', 0, 65535),
      token: reader.string('METRICS_TOKEN'),
      tenantLabels: reader.bool('METRICS_TENANT_LABELS', false),
      maxQueueSeries,
      maxQueueSeriesPerTenant: reader.int(
        'METRICS_MAX_QUEUE_SERIES_PER_TENANT',
        Math.max(1, Math.floor(maxQueueSeries / 10)),
        1,
        maxQueueSeries,
      ),
    },
    log: {
      level: reader.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
      format: reader.oneOf(
        'LOG_FORMAT',
        ['json', 'pretty'] as const,
        // A person at a terminal reads lines; a supervisor or collector reading a pipe gets JSON.
        env.NODE_ENV === 'development' || process.stdout.isTTY === true ? 'pretty' : 'json',
      ),
      requests: reader.bool('LOG_REQUESTS', true),
    },
  };

  if (config.http.headersTimeoutMs > config.http.requestTimeoutMs) {
    problems.push('HTTP_HEADERS_TIMEOUT_MS must not be larger than HTTP_REQUEST_TIMEOUT_MS');
  }
  if (config.workers > 1 && !config.database.url) {
    // PGlite runs one transaction at a time and cannot carry NOTIFY between processes.
    problems.push('WORKERS > 1 needs DATABASE_URL: the embedded database serves one broker process');
  }
  if (config.brokerHeartbeatMs > 0 && config.brokerHeartbeatMs < 100) {
    problems.push('BROKER_HEARTBEAT_MS must be 0 (off) or at least 100');
  }
  if (config.limits.messageMaxBytes > config.bodyLimitBytes) {
    problems.push('MESSAGE_MAX_BYTES must not be larger than BODY_LIMIT: no push could carry such a message');
  }
  if (config.limits.messageMaxBytes > config.limits.responseMaxBytes) {
    problems.push('RESPONSE_MAX_BYTES must not be smaller than MESSAGE_MAX_BYTES: a pop answers at least one message');
  }
  if (config.metrics.token !== undefined && config.metrics.token.length < 16) {
    problems.push('METRICS_TOKEN must be at least 16 characters');
  }
  problems.push(...strayVariableProblems(env, envFileVariables(env)));
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return config;
}

/** Begin only the broker's settings: a variable starting so is meant for the broker, whatever else it is. */
export const SETTING_PREFIXES = [
  'RATE_LIMIT_',
  'LEASE_',
  'TENANT_MAX_',
  'DB_TENANT_',
  'POP_MAX_',
  'BODY_MAX_',
  'RETENTION_',
  'COMPLETED_RETENTION_',
  'DLQ_',
  'EMPTY_PARTITION_',
  'METRICS_',
];

let settings: ReadonlySet<string> | undefined;

/** Every variable loadConfig reads, learnt once by letting it read an environment that records each name. */
export function settingNames(): ReadonlySet<string> {
  if (settings === undefined) {
    const names = new Set<string>();
    const recording = new Proxy<Env>(
      {},
      {
        get: (_target, name) => {
          if (typeof name === 'string') names.add(name);
          return undefined;
        },
      },
    );
    try {
      // It has no variables of its own, so this reading asks for no settingNames() in turn.
      loadConfig(recording);
    } catch (error) {
      // A setting without a default is still a setting: its name was recorded when it was asked for.
      if (!(error instanceof ConfigError)) throw error;
    }
    settings = names;
  }
  return settings;
}

/** Variables the PostgreSQL driver reads itself when DATABASE_URL leaves them out (PGPASSWORD, PGSSLMODE...). */
const DRIVER_VARIABLE = /^PG[A-Z]+$/;

/** What Kubernetes writes for every service of the namespace: a service named "lease-x" gives LEASE_X_SERVICE_HOST. */
function isServiceLink(name: string, value: string | undefined): boolean {
  if (/_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$|_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/.test(name)) return true;
  return name.endsWith('_PORT') && /^(tcp|udp|sctp):\/\//.test(value ?? '');
}

/**
 * A misspelt setting would otherwise be ignored in silence (DATABSE_URL: the broker runs on the embedded database).
 * In the environment, a name close to a setting, or with a prefix only settings use, stops the start; a .env file
 * is written for the broker, so every name in it must be a setting (or the driver's).
 */
function strayVariableProblems(env: Env, fromFile: readonly string[]): string[] {
  const inFile = new Set(fromFile);
  const names = [...new Set([...fromFile, ...Object.keys(env)])];
  if (names.length === 0) return [];
  const known = settingNames();
  const problems: string[] = [];
  for (const name of names) {
    if (known.has(name)) continue;
    const guess = nearMiss(name, known, SETTING_TOLERANCE);
    const suggestion = guess === undefined ? '' : `; did you mean ${guess}?`;
    if (inFile.has(name)) {
      if (!DRIVER_VARIABLE.test(name)) problems.push(`.env: ${name} is not a setting${suggestion}`);
      continue;
    }
    if (isServiceLink(name, env[name])) continue;
    const prefix = SETTING_PREFIXES.find((owned) => name.toUpperCase().startsWith(owned));
    if (guess !== undefined) {
      problems.push(`${name} is not a setting${suggestion}`);
    } else if (prefix !== undefined) {
      const siblings = [...known].filter((setting) => setting.startsWith(prefix));
      problems.push(`${name} is not a setting (${prefix} begins only settings: ${siblings.join(', ')})`);
    }
  }
  return problems;
}

const URL_SCHEMES = ['postgres:', 'postgresql:'];

/** A mistyped scheme or host is found at start, not at the first connection. Never echoes credentials. */
function databaseUrl(reader: EnvReader, problems: string[]): string | undefined {
  const value = reader.string('DATABASE_URL');
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push('DATABASE_URL must be a URL such as postgres://user@host:5432/database');
    return undefined;
  }
  if (!URL_SCHEMES.includes(url.protocol)) {
    problems.push(`DATABASE_URL must start with postgres:// or postgresql://, got "${url.protocol}//"`);
    return undefined;
  }
  if (url.hostname === '' && !url.searchParams.has('host')) {
    problems.push('DATABASE_URL names no host');
    return undefined;
  }
  return value;
}

/**
 * Exact origins, each written as a browser writes Origin (scheme, host, port unless the scheme's default). A wildcard
 * is refused: it would let every site's pages act with the reach of the browser's user.
 */
function allowedOrigins(value: string | undefined, problems: string[]): string[] {
  const origins = new Set<string>();
  for (const entry of (value ?? '').split(',').map((part) => part.trim())) {
    if (entry === '') continue;
    const origin = bareOrigin(entry);
    if (origin === undefined) {
      problems.push(
        'HTTP_ALLOWED_ORIGINS must list origins such as https://app.example.com or http://localhost:3000 ' +
          `(scheme, host and port only), got "${entry}"`,
      );
    } else {
      origins.add(origin);
    }
  }
  return [...origins];
}

function bareOrigin(entry: string): string | undefined {
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return undefined;
  }
  const bare =
    (url.protocol === 'http:' || url.protocol === 'https:') &&
    url.username === '' &&
    url.password === '' &&
    url.pathname === '/' &&
    url.search === '' &&
    url.hash === '' &&
    !entry.includes('?') &&
    !entry.includes('#');
  return bare ? url.origin : undefined;
}

function jwtSettings(reader: EnvReader, problems: string[]): JwtConfig {
  const enabled = reader.bool('JWT_ENABLED', false);
  const jwksUrl = jwksUrlOf(reader.string('JWT_JWKS_URL'), problems);
  const named = reader.optionalOneOf('JWT_ALGORITHM', JWT_ALGORITHMS);
  const listed = reader.list('JWT_ALGORITHMS', JWT_ALGORITHMS);
  // Identity providers sign RS256 unless told otherwise; a shared secret is the default only without one.
  const algorithms = listed ?? [named ?? (jwksUrl !== undefined ? 'RS256' : 'HS256')];
  const algorithm = named ?? algorithms[0];
  const chosen = listed ? `JWT_ALGORITHMS=${algorithms.join(',')}` : `JWT_ALGORITHM=${algorithm}`;
  const secret = reader.string('JWT_SECRET');
  const publicKey = reader.string('JWT_PUBLIC_KEY')?.replace(/\\n/g, '\n');
  // Read for `npm run token` only: the broker itself never needs a private key.
  const privateKey = reader.string('JWT_PRIVATE_KEY')?.replace(/\\n/g, '\n');
  const jwksTimings = {
    cacheMs: reader.int('JWT_JWKS_CACHE_MS', 600_000, 1_000, 86_400_000),
    refetchIntervalMs: reader.int('JWT_JWKS_REFETCH_INTERVAL_MS', 10_000, 100, 3_600_000),
    timeoutMs: reader.int('JWT_JWKS_TIMEOUT_MS', 5_000, 100, 60_000),
  };
  const jwks: JwksConfig | undefined = jwksUrl === undefined ? undefined : { url: jwksUrl, ...jwksTimings };
  const tenantClaim = claimPath(reader, 'JWT_TENANT_CLAIM', problems) ?? 'tenant';
  const rolesClaim = claimPath(reader, 'JWT_ROLES_CLAIM', problems);

  if (named !== undefined && listed !== undefined && !listed.includes(named)) {
    problems.push(
      `JWT_ALGORITHM=${named} must be one of JWT_ALGORITHMS (${listed.join(', ')}): it is what tokens are minted with`,
    );
  }
  const hmac = algorithms.filter(isHmac);
  const asymmetric = algorithms.filter((candidate) => !isHmac(candidate));
  if (jwks !== undefined && hmac.length > 0) {
    // A key set holds public keys; accepting HS* beside it invites a public key's text used as an HMAC secret.
    problems.push(`JWT_JWKS_URL takes public-key algorithms only, not ${hmac.join(', ')} (algorithm confusion)`);
  } else if (hmac.length > 0 && asymmetric.length > 0) {
    problems.push(
      `JWT_ALGORITHMS must not mix HMAC (${hmac.join(', ')}) with public-key algorithms (${asymmetric.join(', ')}): ` +
        'pick one kind of key (algorithm confusion)',
    );
  }
  if (jwks !== undefined && publicKey !== undefined) {
    problems.push('JWT_PUBLIC_KEY and JWT_JWKS_URL are both set; set one: the key, or where the keys are published');
  }

  if (enabled && jwks === undefined) {
    if (hmac.length > 0 && !secret) {
      problems.push(`JWT_SECRET is required when JWT_ENABLED=true and ${chosen}`);
    }
    if (hmac.length > 0 && secret && Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
      // RFC 7518 asks for an HMAC key at least as long as the hash output.
      problems.push(`JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes for ${hmac[0]}; use a long random secret`);
    }
    if (asymmetric.length > 0 && !publicKey) {
      problems.push(
        `JWT_PUBLIC_KEY (PEM) is required when JWT_ENABLED=true and ${chosen} (or JWT_JWKS_URL, where an identity ` +
          'provider publishes its keys)',
      );
    }
    if (asymmetric.length > 0 && publicKey) {
      const keyProblem = publicKeyProblem(publicKey, asymmetric);
      if (keyProblem) problems.push(`JWT_PUBLIC_KEY ${keyProblem}`);
    }
  }

  return {
    enabled,
    algorithm,
    algorithms,
    secret,
    publicKey,
    jwks,
    privateKey,
    issuer: reader.string('JWT_ISSUER'),
    audience: reader.string('JWT_AUDIENCE'),
    clockToleranceSeconds: reader.int('JWT_CLOCK_SKEW_SECONDS', 30, 0, 3600),
    tenantClaim,
    rolesClaim,
    requireTenant: reader.bool('JWT_REQUIRE_TENANT', enabled),
  };
}

/** Plain http is allowed for a provider inside the deployment's own network; anything else is a mistake. */
function jwksUrlOf(value: string | undefined, problems: string[]): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push('JWT_JWKS_URL must be a URL such as https://auth.example.com/.well-known/jwks.json');
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    problems.push(`JWT_JWKS_URL must start with https:// or http://, got "${url.protocol}//"`);
    return undefined;
  }
  if (url.username !== '' || url.password !== '') {
    problems.push('JWT_JWKS_URL must not carry credentials: key sets are public');
    return undefined;
  }
  return url.href;
}

/** A claim name (namespaced ones such as https://example.com/tenant included) or a dotted path into nested claims. */
function claimPath(reader: EnvReader, name: string, problems: string[]): string | undefined {
  const value = reader.string(name);
  if (value !== undefined && value.split('.').some((segment) => segment.trim() === '')) {
    problems.push(`${name} must be a claim name or a dotted path such as realm_access.roles, got "${value}"`);
    return undefined;
  }
  return value;
}

/** Checked at boot, else every token would be refused at request time. Never echoes the key. */
function publicKeyProblem(pem: string, algorithms: readonly JwtAlgorithm[]): string | undefined {
  if (/-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----/.test(pem)) {
    return 'holds a private key; give the broker only the public key';
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    return 'is not a PEM public key';
  }
  for (const algorithm of algorithms) {
    const mismatch = keyMismatch(key, algorithm);
    if (mismatch) return mismatch;
  }
  return undefined;
}

class EnvReader {
  constructor(
    private readonly env: Env,
    private readonly problems: string[],
  ) {}

  string(name: string): string | undefined {
    const value = this.env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.string(name)?.toLowerCase();
    if (value === undefined) return fallback;
    if (['true', '1', 'yes', 'on'].includes(value)) return true;
    if (['false', '0', 'no', 'off'].includes(value)) return false;
    this.problems.push(`${name} must be true or false, got "${value}"`);
    return fallback;
  }

  int(name: string, fallback: number, min: number, max: number): number {
    return this.optionalInt(name, min, max) ?? fallback;
  }

  optionalInt(name: string, min: number, max: number): number | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const parsed = /^-?\d+$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(parsed) || parsed < min || parsed > max) {
      this.problems.push(`${name} must be an integer between ${min} and ${max}, got "${value}"`);
      return undefined;
    }
    return parsed;
  }

  /** `min` 0 lets 0 turn the limit off. */
  size(name: string, fallback: number, min = 1): number {
    const value = this.string(name);
    if (value === undefined) return fallback;
    const match = /^(\d+)\s*(b|kb|mb|gb)?$/i.exec(value);
    const bytes = match ? Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()] : NaN;
    if (!Number.isSafeInteger(bytes) || bytes < min) {
      this.problems.push(`${name} must be a size such as 16mb, 512kb or a byte count, got "${value}"`);
      return fallback;
    }
    return bytes;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    return this.optionalOneOf(name, allowed) ?? fallback;
  }

  optionalOneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const found = allowed.find((candidate) => candidate.toUpperCase() === value.toUpperCase());
    if (!found) this.problems.push(`${name} must be one of ${allowed.join(', ')}, got "${value}"`);
    return found;
  }

  /** A comma list of distinct allowed values; undefined when unset or when any entry is not allowed. */
  list<T extends string>(name: string, allowed: readonly T[]): T[] | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const entries = value.split(',').map((entry) => entry.trim());
    const found = entries.map((entry) => allowed.find((candidate) => candidate.toUpperCase() === entry.toUpperCase()));
    if (entries.includes('') || found.includes(undefined)) {
      this.problems.push(`${name} must be a comma list of ${allowed.join(', ')}, got "${value}"`);
      return undefined;
    }
    return [...new Set(found as T[])];
  }
}
