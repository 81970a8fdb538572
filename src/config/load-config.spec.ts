import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEnvFile } from './env-file';
import { ConfigError, DEFAULT_TENANT_ID, loadConfig, SETTING_PREFIXES, settingNames } from './load-config';

const rsaPem = (modulusLength: number) =>
  generateKeyPairSync('rsa', {
    modulusLength,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const config = loadConfig({});

    expect(config).toMatchObject({
      port: 6632,
      bodyLimitBytes: 16 * 1024 * 1024,
      database: { url: undefined, poolSize: 10, acquireTimeoutMs: 2000, statementTimeoutMs: 5000 },
      jwt: { enabled: false, algorithm: 'HS256', tenantClaim: 'tenant', clockToleranceSeconds: 30 },
      tenantHeader: undefined,
      leaseMaxExtendSeconds: undefined,
      leaseMaxTotalSeconds: undefined,
      defaultTenantId: DEFAULT_TENANT_ID,
    });
  });

  it('parses sizes, numbers and booleans', () => {
    const config = loadConfig({
      BODY_LIMIT: '512kb',
      PORT: '7000',
      JWT_ENABLED: 'true',
      JWT_SECRET: 'a-secret-of-at-least-thirty-two-bytes',
      LEASE_MAX_EXTEND_SECONDS: '300',
      LEASE_MAX_TOTAL_SECONDS: '3600',
      TENANT_HEADER: 'X-Queen-Tenant',
    });

    expect(config.bodyLimitBytes).toBe(512 * 1024);
    expect(config.port).toBe(7000);
    expect(config.jwt.enabled).toBe(true);
    expect(config.leaseMaxExtendSeconds).toBe(300);
    expect(config.leaseMaxTotalSeconds).toBe(3600);
    expect(config.tenantHeader).toBe('x-queen-tenant');
  });

  it('reports every problem at once', () => {
    let thrown: unknown;
    try {
      loadConfig({ PORT: 'eighty', DB_POOL_SIZE: '0', JWT_ENABLED: 'maybe', BODY_LIMIT: 'huge' });
    } catch (error) {
      thrown = error;
    }

    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).problems).toHaveLength(4);
    expect((thrown as ConfigError).message).toContain('PORT must be an integer between 0 and 65535, got "eighty"');
  });

  it('refuses to enable auth without a key for the chosen algorithm', () => {
    expect(() => loadConfig({ JWT_ENABLED: 'true' })).toThrow(/JWT_SECRET is required/);
    expect(() => loadConfig({ JWT_ENABLED: 'true', JWT_ALGORITHM: 'RS256', JWT_SECRET: 'x' })).toThrow(
      /JWT_PUBLIC_KEY \(PEM\) is required/,
    );
  });

  it('refuses an HS secret shorter than 32 bytes when auth is on, without echoing it', () => {
    const short = { JWT_ENABLED: 'true', JWT_SECRET: 'abcdefgh' };

    expect(() => loadConfig(short)).toThrow(/JWT_SECRET must be at least 32 bytes for HS256/);
    expect(() => loadConfig(short)).not.toThrow(/abcdefgh/);
    expect(loadConfig({ JWT_SECRET: 'abcdefgh' }).jwt.enabled).toBe(false);
    expect(loadConfig({ JWT_ENABLED: 'true', JWT_SECRET: 'x'.repeat(32) }).jwt.secret).toHaveLength(32);
  });

  it('requires a tenant claim by default when auth is on, and only then', () => {
    const secret = 'x'.repeat(32);

    expect(loadConfig({ JWT_ENABLED: 'true', JWT_SECRET: secret }).jwt.requireTenant).toBe(true);
    expect(loadConfig({ JWT_ENABLED: 'true', JWT_SECRET: secret, JWT_REQUIRE_TENANT: 'false' }).jwt.requireTenant).toBe(
      false,
    );
    expect(loadConfig({}).jwt.requireTenant).toBe(false);
  });

  it('applies the documented limits by default', () => {
    const config = loadConfig({});

    expect(config.http).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 5_000,
      maxConnections: 4_096,
      tenantMaxConnections: 1_024,
      tenantMaxRequests: 1_024,
      bodyMinBytesPerSecond: 240,
      bodyMinRateGraceMs: 5_000,
      allowedOrigins: [],
    });
    expect(config.limits).toEqual({
      messageMaxBytes: 4 * 1024 ** 2,
      bodyMaxJsonValues: 500_000,
      bodyMaxInflateRatio: 100,
      responseMaxBytes: 8 * 1024 ** 2,
      popMaxWaitingPerTenant: 1_000,
      tenantMaxHeavyReads: 4,
      tenantMaxConnections: 8,
      transactionMaxOperations: 20_000,
      rateLimits: { renew: 1_000, consume: 2_000, produce: 2_000, manage: 500 },
      quotas: {
        queues: 1_000,
        partitions: 100_000,
        consumerGroups: 1_000,
        storedBytes: 10 * 1024 ** 3,
        storedMessages: 10_000_000,
      },
    });
    expect(config.retention.minSeconds).toBe(0);
    expect(config.database.connectTimeoutMs).toBe(10_000);
    expect(config.leaseRenewalBatchRows).toBe(2_000);
    expect(config.docsEnabled).toBe(true);
    expect(config.metrics).toEqual({
      enabled: true,
      port: undefined,
      token: undefined,
      tenantLabels: false,
      maxQueueSeries: 1_000,
      maxQueueSeriesPerTenant: 100,
    });
    expect(config.log).toEqual({ level: 'info', format: 'json', requests: true });
  });

  it("reads the cap on a transaction's operations, and refuses 0", () => {
    expect(loadConfig({ TRANSACTION_MAX_OPERATIONS: '500' }).limits.transactionMaxOperations).toBe(500);
    expect(() => loadConfig({ TRANSACTION_MAX_OPERATIONS: '0' })).toThrow(
      /TRANSACTION_MAX_OPERATIONS must be an integer between 1 and 100000/,
    );
  });

  it('reads the storage quotas as a size and a count, 0 turning either off, and refuses what is not one', () => {
    const config = loadConfig({ TENANT_MAX_STORED_BYTES: '512mb', TENANT_MAX_STORED_MESSAGES: '0' });

    expect(config.limits.quotas).toMatchObject({ storedBytes: 512 * 1024 ** 2, storedMessages: 0 });
    expect(loadConfig({ TENANT_MAX_STORED_BYTES: '0' }).limits.quotas.storedBytes).toBe(0);
    expect(() => loadConfig({ TENANT_MAX_STORED_BYTES: 'lots' })).toThrow(
      'TENANT_MAX_STORED_BYTES must be a size such as 16mb, 512kb or a byte count, got "lots"',
    );
    expect(() => loadConfig({ TENANT_MAX_STORED_BYTES: '99999999999gb' })).toThrow('TENANT_MAX_STORED_BYTES');
    expect(() => loadConfig({ BODY_LIMIT: '0' })).toThrow('BODY_LIMIT must be a size');
    expect(() => loadConfig({ TENANT_MAX_STORED_MESSAGES: '-1' })).toThrow('TENANT_MAX_STORED_MESSAGES');
    expect(loadConfig({ QUEUE_MIN_RETENTION_SECONDS: '3600' }).retention.minSeconds).toBe(3600);
  });

  it('reads the observability settings and refuses a short metrics token', () => {
    const config = loadConfig({
      METRICS_PORT: '9464',
      METRICS_TENANT_LABELS: 'true',
      LOG_LEVEL: 'debug',
      LOG_FORMAT: 'pretty',
      LOG_REQUESTS: 'false',
    });
    expect(config.metrics).toMatchObject({ port: 9464, tenantLabels: true });
    expect(config.log).toEqual({ level: 'debug', format: 'pretty', requests: false });
    expect(loadConfig({ NODE_ENV: 'development' }).log.format).toBe('pretty');
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow('METRICS_TOKEN must be at least 16 characters');
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow('LOG_LEVEL');
  });

  it('gives each tenant a tenth of the queue series by default, and never more than all of them', () => {
    expect(loadConfig({ METRICS_MAX_QUEUE_SERIES: '50' }).metrics.maxQueueSeriesPerTenant).toBe(5);
    expect(loadConfig({ METRICS_MAX_QUEUE_SERIES: '5' }).metrics.maxQueueSeriesPerTenant).toBe(1);
    expect(loadConfig({ METRICS_MAX_QUEUE_SERIES_PER_TENANT: '1000' }).metrics.maxQueueSeriesPerTenant).toBe(1_000);
    expect(() => loadConfig({ METRICS_MAX_QUEUE_SERIES: '50', METRICS_MAX_QUEUE_SERIES_PER_TENANT: '51' })).toThrow(
      /METRICS_MAX_QUEUE_SERIES_PER_TENANT must be an integer between 1 and 50/,
    );
  });

  it('keeps a fifth of the pool (at least one connection) out of any one tenant reach', () => {
    expect(loadConfig({ DB_POOL_SIZE: '4' }).limits.tenantMaxConnections).toBe(3);
    expect(loadConfig({ DB_POOL_SIZE: '1' }).limits.tenantMaxConnections).toBe(1);
    expect(loadConfig({ DB_POOL_SIZE: '20', DB_TENANT_MAX_CONNECTIONS: '20' }).limits.tenantMaxConnections).toBe(20);
    expect(() => loadConfig({ DB_POOL_SIZE: '4', DB_TENANT_MAX_CONNECTIONS: '5' })).toThrow(
      /DB_TENANT_MAX_CONNECTIONS must be an integer between 1 and 4/,
    );
  });

  it('reads allowed origins as browsers write them, and refuses wildcards, paths and non-web schemes', () => {
    expect(
      loadConfig({
        HTTP_ALLOWED_ORIGINS: ' https://App.Example.com , http://localhost:3000/,https://app.example.com:443',
      }).http.allowedOrigins,
    ).toEqual(['https://app.example.com', 'http://localhost:3000']);
    for (const entry of [
      '*',
      'null',
      'app.example.com',
      'https://app.example.com/path',
      'ftp://files.example.com',
      'https://a.example?x',
      'https://user@a.example',
    ]) {
      expect(() => loadConfig({ HTTP_ALLOWED_ORIGINS: `https://ok.example,${entry}` })).toThrow(
        `HTTP_ALLOWED_ORIGINS must list origins such as https://app.example.com or http://localhost:3000 (scheme, host and port only), got "${entry}"`,
      );
    }
  });

  it('refuses a header timeout longer than the request timeout', () => {
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '5000', HTTP_REQUEST_TIMEOUT_MS: '1000' })).toThrow(
      /HTTP_HEADERS_TIMEOUT_MS must not be larger than HTTP_REQUEST_TIMEOUT_MS/,
    );
  });

  it('refuses sizes that contradict each other: a message larger than a body or than an answer', () => {
    expect(() => loadConfig({ BODY_LIMIT: '2mb', MESSAGE_MAX_BYTES: '4mb' })).toThrow(
      /MESSAGE_MAX_BYTES must not be larger than BODY_LIMIT/,
    );
    expect(() => loadConfig({ RESPONSE_MAX_BYTES: '1mb', MESSAGE_MAX_BYTES: '2mb' })).toThrow(
      /RESPONSE_MAX_BYTES must not be smaller than MESSAGE_MAX_BYTES/,
    );
    // Left unset, the message bound follows a smaller body or answer bound.
    expect(loadConfig({ BODY_LIMIT: '2mb' }).limits.messageMaxBytes).toBe(2 * 1024 ** 2);
    expect(loadConfig({ RESPONSE_MAX_BYTES: '1mb' }).limits.messageMaxBytes).toBe(1024 ** 2);
  });

  it('refuses a DATABASE_URL that is not a PostgreSQL URL, never echoing it', () => {
    for (const url of [
      'postgress://u:secret@host/db',
      'mysql://u:secret@host/db',
      'not a url secret',
      'postgres:///db',
    ]) {
      let message = '';
      try {
        loadConfig({ DATABASE_URL: url });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/DATABASE_URL/);
      expect(message).not.toContain('secret');
    }
    expect(loadConfig({ DATABASE_URL: 'postgresql://u@db.internal:5433/leasehold' }).database.url).toBeDefined();
    expect(loadConfig({ DATABASE_URL: 'postgres:///leasehold?host=/var/run/postgresql' }).database.url).toBeDefined();
  });

  it('refuses several workers on the embedded database', () => {
    expect(() => loadConfig({ WORKERS: '2' })).toThrow(/WORKERS > 1 needs DATABASE_URL/);
    expect(loadConfig({ WORKERS: '2', DATABASE_URL: 'postgres://localhost/leasehold' }).workers).toBe(2);
  });

  it('rejects an unknown algorithm, including none', () => {
    expect(() => loadConfig({ JWT_ALGORITHM: 'none' })).toThrow(/JWT_ALGORITHM must be one of/);
  });

  describe('JWT_PUBLIC_KEY for RS256', () => {
    const rsa = rsaPem(2048);
    const rs256 = (publicKey: string) => ({ JWT_ENABLED: 'true', JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: publicKey });

    it('accepts a 2048-bit RSA public key, also with its newlines written as \\n', () => {
      const config = loadConfig(rs256(rsa.publicKey.replace(/\n/g, '\\n')));

      expect(config.jwt.publicKey).toBe(rsa.publicKey);
    });

    it('stops the boot when it holds a private key, without echoing the key', () => {
      expect(() => loadConfig(rs256(rsa.privateKey))).toThrow(/JWT_PUBLIC_KEY holds a private key/);
      expect(() => loadConfig(rs256(rsa.privateKey))).not.toThrow(/MII/);
    });

    it('stops the boot when it is not PEM', () => {
      expect(() => loadConfig(rs256('not a key'))).toThrow(/JWT_PUBLIC_KEY is not a PEM public key/);
    });

    it('stops the boot for a key that is not RSA', () => {
      const ec = generateKeyPairSync('ec', {
        namedCurve: 'P-256',
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });

      expect(() => loadConfig(rs256(ec.publicKey))).toThrow(/JWT_PUBLIC_KEY must be an RSA key, got ec/);
    });

    it('stops the boot for an RSA key below 2048 bits, which jsonwebtoken would refuse on every request', () => {
      const small = rsaPem(1024);

      expect(() => loadConfig(rs256(small.publicKey))).toThrow(/JWT_PUBLIC_KEY must be at least 2048 bits, got 1024/);
    });
  });

  describe('accepted algorithms and identity providers', () => {
    const JWKS_URL = 'https://auth.example.com/realms/main/protocol/openid-connect/certs';
    const jwks = (env: Record<string, string> = {}) => ({ JWT_ENABLED: 'true', JWT_JWKS_URL: JWKS_URL, ...env });
    const publicPem = (type: 'ec' | 'ed25519', namedCurve?: string) =>
      generateKeyPairSync(type as 'ec', {
        namedCurve: namedCurve ?? 'P-256',
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      }).publicKey;

    it('accepts JWT_ALGORITHM alone by default, as before', () => {
      expect(loadConfig({}).jwt).toMatchObject({ algorithm: 'HS256', algorithms: ['HS256'], jwks: undefined });
    });

    it('reads a key set with RS256 and the documented bounds by default', () => {
      expect(loadConfig(jwks()).jwt).toMatchObject({
        algorithm: 'RS256',
        algorithms: ['RS256'],
        jwks: { url: JWKS_URL, cacheMs: 600_000, refetchIntervalMs: 10_000, timeoutMs: 5_000 },
      });
    });

    it('reads JWT_ALGORITHMS as an allow-list, whatever the case, without repeats', () => {
      const { jwt } = loadConfig(jwks({ JWT_ALGORITHMS: 'rs256, ES256,eddsa,RS256' }));

      expect(jwt.algorithms).toEqual(['RS256', 'ES256', 'EdDSA']);
      expect(jwt.algorithm).toBe('RS256');
    });

    it.each([
      [
        'none',
        { JWT_ALGORITHMS: 'RS256,none' },
        /JWT_ALGORITHMS must be a comma list of HS256, .*EdDSA, got "RS256,none"/,
      ],
      ['an empty entry', { JWT_ALGORITHMS: 'RS256,,ES256' }, /JWT_ALGORITHMS must be a comma list/],
      [
        'HS256 with a key set',
        { JWT_ALGORITHMS: 'RS256,HS256' },
        /JWT_JWKS_URL takes public-key algorithms only, not HS256/,
      ],
      ['HS256 named alone with a key set', { JWT_ALGORITHM: 'HS256' }, /JWT_JWKS_URL takes public-key algorithms only/],
      [
        'JWT_ALGORITHM outside the list',
        { JWT_ALGORITHM: 'ES256', JWT_ALGORITHMS: 'RS256' },
        /JWT_ALGORITHM=ES256 must be one of JWT_ALGORITHMS/,
      ],
      [
        'a static key beside the key set',
        { JWT_PUBLIC_KEY: rsaPem(2048).publicKey },
        /JWT_PUBLIC_KEY and JWT_JWKS_URL are both set/,
      ],
      [
        'a URL of another scheme',
        { JWT_JWKS_URL: 'ftp://auth.example.com/jwks' },
        /JWT_JWKS_URL must start with https:\/\/ or http:\/\/, got "ftp:\/\/"/,
      ],
      ['something not a URL', { JWT_JWKS_URL: 'auth.example.com/jwks' }, /JWT_JWKS_URL must be a URL/],
      [
        'credentials in the URL',
        { JWT_JWKS_URL: 'https://user:pw@auth.example.com/jwks' },
        /JWT_JWKS_URL must not carry credentials/,
      ],
      [
        'a timeout out of range',
        { JWT_JWKS_TIMEOUT_MS: '0' },
        /JWT_JWKS_TIMEOUT_MS must be an integer between 100 and 60000/,
      ],
    ])('stops the boot for %s', (_case, env, problem) => {
      expect(() => loadConfig(jwks(env as Record<string, string>))).toThrow(problem);
    });

    it('refuses HMAC beside public-key algorithms without a key set too', () => {
      expect(() => loadConfig({ JWT_ALGORITHMS: 'HS256,RS256' })).toThrow(
        /must not mix HMAC \(HS256\) with public-key/,
      );
    });

    it('takes plain http for a provider inside the network', () => {
      expect(loadConfig(jwks({ JWT_JWKS_URL: 'http://keycloak:8080/certs' })).jwt.jwks?.url).toBe(
        'http://keycloak:8080/certs',
      );
    });

    it('accepts a static EC P-256 key for ES256 and an Ed25519 key for EdDSA', () => {
      const es256 = { JWT_ENABLED: 'true', JWT_ALGORITHM: 'ES256', JWT_PUBLIC_KEY: publicPem('ec') };
      const eddsa = { JWT_ENABLED: 'true', JWT_ALGORITHM: 'EdDSA', JWT_PUBLIC_KEY: publicPem('ed25519') };

      expect(loadConfig(es256).jwt.algorithms).toEqual(['ES256']);
      expect(loadConfig(eddsa).jwt.algorithms).toEqual(['EdDSA']);
    });

    it.each([
      [
        'a P-384 key for ES256',
        'ES256',
        () => publicPem('ec', 'P-384'),
        /must be on curve P-256 for ES256, got secp384r1/,
      ],
      ['an RSA key for EdDSA', 'EdDSA', () => rsaPem(2048).publicKey, /must be an Ed25519 or Ed448 key, got rsa/],
      ['an Ed25519 key for ES256', 'ES256', () => publicPem('ed25519'), /must be an EC key, got ed25519/],
      ['an EC key among RS256 and ES256', 'RS256,ES256', () => publicPem('ec'), /must be an RSA key, got ec/],
    ])('stops the boot for %s', (_case, algorithms, key, problem) => {
      const env = { JWT_ENABLED: 'true', JWT_ALGORITHMS: algorithms, JWT_PUBLIC_KEY: key() };

      expect(() => loadConfig(env)).toThrow(problem);
    });

    it('reads nested and namespaced claim paths, and refuses an empty segment', () => {
      const config = loadConfig({ JWT_TENANT_CLAIM: 'org.id', JWT_ROLES_CLAIM: 'https://leasehold.example.com/roles' });

      expect(config.jwt).toMatchObject({ tenantClaim: 'org.id', rolesClaim: 'https://leasehold.example.com/roles' });
      expect(loadConfig({}).jwt).toMatchObject({ tenantClaim: 'tenant', rolesClaim: undefined });
      expect(() => loadConfig({ JWT_ROLES_CLAIM: 'realm_access..roles' })).toThrow(
        /JWT_ROLES_CLAIM must be a claim name or a dotted path/,
      );
    });
  });

  it('reads JWT_PRIVATE_KEY for the token command without requiring it', () => {
    expect(loadConfig({ JWT_PRIVATE_KEY: 'line1\\nline2' }).jwt.privateKey).toBe('line1\nline2');
    expect(loadConfig({}).jwt.privateKey).toBeUndefined();
  });
});

describe('variables that look like settings but are not', () => {
  function problemsOf(env: Record<string, string | undefined>): string[] {
    try {
      loadConfig(env);
      return [];
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
  }

  it.each([
    ['DATABSE_URL', 'DATABSE_URL is not a setting; did you mean DATABASE_URL?'],
    ['DB_POOLSIZE', 'DB_POOLSIZE is not a setting; did you mean DB_POOL_SIZE?'],
    ['JWT_SECERT', 'JWT_SECERT is not a setting; did you mean JWT_SECRET?'],
    ['database_url', 'database_url is not a setting; did you mean DATABASE_URL?'],
    ['LOGLEVEL', 'LOGLEVEL is not a setting; did you mean LOG_LEVEL?'],
  ])('stops the start on %s in the environment, naming the setting it is close to', (name, problem) => {
    expect(problemsOf({ [name]: 'postgres://user:s3cret@db/leasehold' })).toEqual([problem]);
  });

  it('stops the start on a variable with a prefix only settings use, listing those settings', () => {
    expect(problemsOf({ RATE_LIMIT_PUSH: '10' })).toEqual([
      'RATE_LIMIT_PUSH is not a setting (RATE_LIMIT_ begins only settings: ' +
        'RATE_LIMIT_RENEW, RATE_LIMIT_CONSUME, RATE_LIMIT_PRODUCE, RATE_LIMIT_MANAGE)',
    ]);
    expect(problemsOf({ LEASE_SECONDS: '30' })[0]).toMatch(/^LEASE_SECONDS is not a setting \(LEASE_ begins only/);
  });

  it('lists every stray variable with the other problems, and never a value', () => {
    const problems = problemsOf({ PORT: 'eighty', DATABSE_URL: 'postgres://user:s3cret@db/x', TENANT_MAX_TOPICS: '5' });
    expect(problems).toEqual([
      'PORT must be an integer between 0 and 65535, got "eighty"',
      'DATABSE_URL is not a setting; did you mean DATABASE_URL?',
      expect.stringMatching(/^TENANT_MAX_TOPICS is not a setting \(TENANT_MAX_ begins only settings: TENANT_MAX_/),
    ]);
    expect(problems.join('\n')).not.toContain('s3cret');
  });

  it('leaves alone the variables of other software a broker runs among', () => {
    const env = Object.fromEntries(OTHER_SOFTWARE.map((name) => [name, 'x']));
    expect(problemsOf({ ...env, NODE_ENV: 'production' })).toEqual([]);
  });

  it("leaves alone the variables the project's own tests, benchmarks and scripts set", () => {
    const names = new Set<string>();
    for (const file of sourcesUnder(['test', 'bench', 'scripts', '.ci'])) {
      const text = readFileSync(file, 'utf8');
      for (const [, name] of text.matchAll(/process\.env\.([A-Za-z_][A-Za-z0-9_]*)/g)) names.add(name);
      for (const [, name] of text.matchAll(/^\s*(?:export\s+)?([A-Z][A-Z0-9_]+)=/gm)) names.add(name);
    }
    expect(names.size).toBeGreaterThan(20);
    expect(problemsOf(Object.fromEntries([...names].map((name) => [name, '1']))).filter(notAValue)).toEqual([]);
  });

  it('leaves alone the variables Kubernetes writes for the services of a namespace', () => {
    expect(
      problemsOf({
        LEASE_MANAGER_SERVICE_HOST: '10.0.0.7',
        LEASE_MANAGER_SERVICE_PORT: '80',
        LEASE_MANAGER_SERVICE_PORT_HTTP: '80',
        LEASE_MANAGER_PORT: 'tcp://10.0.0.7:80',
        LEASE_MANAGER_PORT_80_TCP: 'tcp://10.0.0.7:80',
        LEASE_MANAGER_PORT_80_TCP_PROTO: 'tcp',
        LEASE_MANAGER_PORT_80_TCP_PORT: '80',
        LEASE_MANAGER_PORT_80_TCP_ADDR: '10.0.0.7',
      }),
    ).toEqual([]);
  });

  it('holds each prefix to the settings: every one begins at least one setting', () => {
    for (const prefix of SETTING_PREFIXES) {
      expect([prefix, [...settingNames()].some((name) => name.startsWith(prefix))]).toEqual([prefix, true]);
    }
  });

  describe('in a .env file, which is written for the broker', () => {
    let dir: string;

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'leasehold-env-'));
    });

    afterEach(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    function fromFile(content: string, env: Record<string, string | undefined> = {}): string[] {
      writeFileSync(join(dir, '.env'), content);
      loadEnvFile(join(dir, '.env'), env);
      return problemsOf(env);
    }

    it('stops the start on a near miss, with the suggestion', () => {
      expect(fromFile('DATABSE_URL=postgres://db/leasehold\n')).toEqual([
        '.env: DATABSE_URL is not a setting; did you mean DATABASE_URL?',
      ]);
    });

    it('stops the start on any name that is not a setting, even one the environment also sets', () => {
      expect(fromFile('HTTP_PROXY=http://proxy:3128\nPORT=7000\nFOO=1\n', { FOO: '2' }).sort()).toEqual([
        '.env: FOO is not a setting',
        '.env: HTTP_PROXY is not a setting',
      ]);
    });

    it("accepts the settings and the PostgreSQL driver's own variables", () => {
      expect(fromFile('PORT=7000\nNODE_ENV=production\nPGPASSWORD=secret\nPGSSLMODE=require\n')).toEqual([]);
    });
  });
});

/** Common in the environment of a Node service on Linux, in containers, CI and Kubernetes. */
const OTHER_SOFTWARE = [
  'PATH',
  'HOME',
  'HOSTNAME',
  'USER',
  'LOGNAME',
  'SHELL',
  'PWD',
  'OLDPWD',
  'SHLVL',
  '_',
  'LANG',
  'LC_ALL',
  'TERM',
  'TZ',
  'TMPDIR',
  'EDITOR',
  'DISPLAY',
  'MAIL',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'ALL_PROXY',
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_EXTRA_CA_CERTS',
  'NODE_NO_WARNINGS',
  'NODE_TLS_REJECT_UNAUTHORIZED',
  'NODE_VERSION',
  'YARN_VERSION',
  'NO_COLOR',
  'FORCE_COLOR',
  'DEBUG',
  'UV_THREADPOOL_SIZE',
  'PGHOST',
  'PGPORT',
  'PGUSER',
  'PGPASSWORD',
  'PGDATABASE',
  'PGSSLMODE',
  'PGAPPNAME',
  'POSTGRES_PASSWORD',
  'POSTGRES_USER',
  'POSTGRES_DB',
  'REDIS_URL',
  'npm_config_cache',
  'npm_lifecycle_event',
  'npm_package_name',
  'npm_execpath',
  'npm_node_execpath',
  'INIT_CWD',
  'JEST_WORKER_ID',
  'CI',
  'GITHUB_ACTIONS',
  'GITHUB_WORKSPACE',
  'GITHUB_SHA',
  'GITHUB_REF',
  'RUNNER_OS',
  'RUNNER_TEMP',
  'GITLAB_CI',
  'CI_JOB_ID',
  'BUILDKITE',
  'KUBERNETES_SERVICE_HOST',
  'KUBERNETES_SERVICE_PORT',
  'KUBERNETES_SERVICE_PORT_HTTPS',
  'KUBERNETES_PORT',
  'KUBERNETES_PORT_443_TCP',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
  'AWS_ACCESS_KEY_ID',
  'DOCKER_HOST',
  'CONTAINER_NAME',
  'JAVA_HOME',
  'GOPATH',
  'PYTHONPATH',
  'PYTHONUNBUFFERED',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_SERVICE_NAME',
  'DD_ENV',
  'DD_SERVICE',
  'SENTRY_DSN',
  'APP_ENV',
  'PORT0',
  'HOST_IP',
  'POD_NAME',
  'POD_NAMESPACE',
];

/** A test's own variable can look like a setting only by its value (a number where a size is read, say). */
function notAValue(problem: string): boolean {
  return / is not a setting/.test(problem);
}

function sourcesUnder(folders: string[]): string[] {
  const ROOT = join(__dirname, '..', '..');
  const files: string[] = [];
  const visit = (path: string): void => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) visit(child);
      else if (/\.(ts|js|sh)$|^run$/.test(entry.name)) files.push(child);
    }
  };
  for (const folder of folders) visit(join(ROOT, folder));
  return files;
}
