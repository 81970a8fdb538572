import { ConfigError, DEFAULT_TENANT_ID, loadConfig } from './load-config';

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
      defaultTenantId: DEFAULT_TENANT_ID,
    });
  });

  it('parses sizes, numbers and booleans', () => {
    const config = loadConfig({
      BODY_LIMIT: '512kb',
      PORT: '7000',
      JWT_ENABLED: 'true',
      JWT_SECRET: 's3cret',
      LEASE_MAX_EXTEND_SECONDS: '300',
      TENANT_HEADER: 'X-Queen-Tenant',
    });

    expect(config.bodyLimitBytes).toBe(512 * 1024);
    expect(config.port).toBe(7000);
    expect(config.jwt.enabled).toBe(true);
    expect(config.leaseMaxExtendSeconds).toBe(300);
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

  it('rejects an unknown algorithm, including none', () => {
    expect(() => loadConfig({ JWT_ALGORITHM: 'none' })).toThrow(/JWT_ALGORITHM must be one of/);
  });
});
