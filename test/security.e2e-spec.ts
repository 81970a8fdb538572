import { NestExpressApplication } from '@nestjs/platform-express';
import { sign, SignOptions } from 'jsonwebtoken';
import request from 'supertest';
import { Database } from '../src/database/database';
import { AppModule } from '../src/app.module';
import { AccessLevel } from '../src/auth/access-level';
import { Role } from '../src/auth/principal';
import { mintToken } from '../src/auth/token-minting';
import { uuidv7 } from '../src/common/uuid';
import { APP_CONFIG, AppConfig } from '../src/config/app-config';
import { DEFAULT_TENANT_ID } from '../src/config/load-config';
import { sql, tenantSnapshot } from './support/db-state';
import { createLease, expiries } from './support/lease-fixture';
import { rawRequest, RawResponse } from './support/raw-request';
import { discoverRoutes } from './support/routes';
import {
  CONSUMER_GROUP as OWNED_CONSUMER_GROUP,
  createOwnedQueue,
  OwnedQueue,
  randomHex,
} from './support/tenant-fixture';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { rs256TokenFromAnyKey, TEST_JWT_SECRET, unsignedToken } from './support/tokens';

const ISSUER = 'https://issuer.leasehold.test';
const AUDIENCE = 'leasehold-security-suite';
const SKEW_SECONDS = 30;
const HS_ENV = {
  JWT_ENABLED: 'true',
  JWT_ALGORITHM: 'HS256',
  JWT_SECRET: TEST_JWT_SECRET,
  JWT_ISSUER: ISSUER,
  JWT_AUDIENCE: AUDIENCE,
  JWT_CLOCK_SKEW_SECONDS: String(SKEW_SECONDS),
};

const ROLES: readonly Role[] = ['read-only', 'write-only', 'read-write', 'admin'];

/** The contract's "Authentication and roles", written out here rather than imported from src/auth. */
const CONTRACT_ROLES: Record<AccessLevel, readonly Role[]> = {
  public: ROLES,
  'any-role': ROLES,
  'read-only': ['read-only', 'read-write', 'admin'],
  write: ['write-only', 'read-write', 'admin'],
  'read-write': ['read-write', 'admin'],
  admin: ['admin'],
};

interface RouteRow {
  /** Method and path pattern exactly as the Nest router registers it. */
  route: string;
  level: AccessLevel;
  /** Served by Swagger's own middleware rather than a controller: always present. */
  swagger?: true;
  /** Registered only to refuse the method (405) for everyone. */
  refusesMethod?: true;
  /**
   * Spans tenants, so no tenant's role opens it: with auth on it takes
   * METRICS_TOKEN instead, and without one (as here) it is not served.
   */
  metricsToken?: true;
  /** A concrete request; `queue` is a fresh name in the caller's fresh tenant. */
  request: (queue: string) => { path: string; body?: object };
}

/*
 * Every route of the contract. Rows whose route this build does not register
 * are skipped by name, and come alive as soon as the route is merged.
 */
const ROUTE_TABLE: RouteRow[] = [
  { route: 'GET /health', level: 'public', request: () => ({ path: '/health' }) },
  { route: 'GET /health/live', level: 'public', request: () => ({ path: '/health/live' }) },
  { route: 'GET /health/ready', level: 'public', request: () => ({ path: '/health/ready' }) },
  { route: 'GET /metrics', level: 'public', metricsToken: true, request: () => ({ path: '/metrics' }) },
  { route: 'GET /docs', level: 'public', swagger: true, request: () => ({ path: '/docs' }) },
  { route: 'GET /docs-json', level: 'public', swagger: true, request: () => ({ path: '/docs-json' }) },
  {
    route: 'POST /api/v1/lease/:leaseId/extend',
    level: 'read-write',
    request: () => ({ path: `/api/v1/lease/${uuidv7()}/extend`, body: { seconds: 1 } }),
  },
  {
    route: 'POST /api/v1/push',
    level: 'write',
    request: (queue) => ({ path: '/api/v1/push', body: { items: [{ queue, payload: { probe: true } }] } }),
  },
  {
    route: 'GET /api/v1/pop/queue/:queue',
    level: 'read-write',
    request: (queue) => ({ path: `/api/v1/pop/queue/${queue}` }),
  },
  {
    route: 'GET /api/v1/pop/queue/:queue/partition/:partition',
    level: 'read-write',
    request: (queue) => ({ path: `/api/v1/pop/queue/${queue}/partition/Default` }),
  },
  {
    route: 'HEAD /api/v1/pop/queue/:queue',
    level: 'public',
    refusesMethod: true,
    request: (queue) => ({ path: `/api/v1/pop/queue/${queue}` }),
  },
  {
    route: 'HEAD /api/v1/pop/queue/:queue/partition/:partition',
    level: 'public',
    refusesMethod: true,
    request: (queue) => ({ path: `/api/v1/pop/queue/${queue}/partition/Default` }),
  },
  {
    route: 'GET /api/v1/pop',
    level: 'read-write',
    request: () => ({ path: '/api/v1/pop?namespace=probe' }),
  },
  {
    route: 'HEAD /api/v1/pop',
    level: 'public',
    refusesMethod: true,
    request: () => ({ path: '/api/v1/pop?namespace=probe' }),
  },
  {
    route: 'GET /api/v1/resources/namespaces',
    level: 'read-only',
    request: () => ({ path: '/api/v1/resources/namespaces' }),
  },
  { route: 'GET /api/v1/resources/tasks', level: 'read-only', request: () => ({ path: '/api/v1/resources/tasks' }) },
  {
    route: 'POST /api/v1/ack',
    level: 'read-write',
    request: () => ({ path: '/api/v1/ack', body: { transactionId: 'probe', partitionId: uuidv7() } }),
  },
  {
    route: 'POST /api/v1/ack/batch',
    level: 'read-write',
    request: () => ({ path: '/api/v1/ack/batch', body: { acknowledgments: [] } }),
  },
  {
    route: 'POST /api/v1/transaction',
    level: 'read-write',
    request: (queue) => ({
      path: '/api/v1/transaction',
      body: { operations: [{ type: 'push', items: [{ queue, payload: 1 }] }] },
    }),
  },
  {
    route: 'POST /streams/v1/queries',
    level: 'read-write',
    request: (queue) => ({
      path: '/streams/v1/queries',
      body: { name: `probe-${queue}`, source_queue: queue, config_hash: 'probe' },
    }),
  },
  { route: 'GET /streams/v1/queries', level: 'read-only', request: () => ({ path: '/streams/v1/queries' }) },
  {
    route: 'DELETE /streams/v1/queries/:name',
    level: 'admin',
    request: () => ({ path: '/streams/v1/queries/probe' }),
  },
  {
    route: 'POST /streams/v1/cycle',
    level: 'read-write',
    request: () => ({ path: '/streams/v1/cycle', body: { query_id: uuidv7(), partition_id: uuidv7() } }),
  },
  {
    route: 'POST /streams/v1/state/get',
    level: 'read-write',
    request: () => ({ path: '/streams/v1/state/get', body: { query_id: uuidv7(), partition_id: uuidv7() } }),
  },
  {
    route: 'POST /api/v1/configure',
    level: 'read-write',
    request: (queue) => ({ path: '/api/v1/configure', body: { queue, options: { leaseTime: 30 } } }),
  },
  { route: 'GET /api/v1/resources/queues', level: 'read-only', request: () => ({ path: '/api/v1/resources/queues' }) },
  { route: 'GET /api/v1/resources/quotas', level: 'read-only', request: () => ({ path: '/api/v1/resources/quotas' }) },
  {
    route: 'GET /api/v1/resources/queues/:queue',
    level: 'read-only',
    request: (queue) => ({ path: `/api/v1/resources/queues/${queue}` }),
  },
  {
    route: 'GET /api/v1/resources/queues/:queue/leases',
    level: 'read-only',
    request: (queue) => ({ path: `/api/v1/resources/queues/${queue}/leases` }),
  },
  {
    route: 'GET /api/v1/resources/queues/:queue/history',
    level: 'read-only',
    request: (queue) => ({ path: `/api/v1/resources/queues/${queue}/history?range=day` }),
  },
  {
    route: 'GET /api/v1/resources/history',
    level: 'read-only',
    request: () => ({ path: '/api/v1/resources/history' }),
  },
  { route: 'GET /api/v1/whoami', level: 'any-role', request: () => ({ path: '/api/v1/whoami' }) },
  {
    route: 'DELETE /api/v1/resources/queues/:queue',
    level: 'admin',
    request: (queue) => ({ path: `/api/v1/resources/queues/${queue}` }),
  },
  { route: 'GET /api/v1/dlq', level: 'read-only', request: (queue) => ({ path: `/api/v1/dlq?queue=${queue}` }) },
  { route: 'GET /api/v1/consumer-groups', level: 'read-only', request: () => ({ path: '/api/v1/consumer-groups' }) },
  {
    route: 'GET /api/v1/consumer-groups/lagging',
    level: 'read-only',
    request: () => ({ path: '/api/v1/consumer-groups/lagging' }),
  },
  {
    route: 'GET /api/v1/consumer-groups/:group',
    level: 'read-only',
    request: () => ({ path: '/api/v1/consumer-groups/probe' }),
  },
  {
    route: 'DELETE /api/v1/consumer-groups/:group',
    level: 'admin',
    request: () => ({ path: '/api/v1/consumer-groups/probe' }),
  },
  {
    route: 'DELETE /api/v1/consumer-groups/:group/queues/:queue',
    level: 'admin',
    request: (queue) => ({ path: `/api/v1/consumer-groups/probe/queues/${queue}` }),
  },
  {
    route: 'POST /api/v1/consumer-groups/:group/queues/:queue/seek',
    level: 'read-write',
    request: (queue) => ({ path: `/api/v1/consumer-groups/probe/queues/${queue}/seek`, body: { toEnd: true } }),
  },
  {
    route: 'POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek',
    level: 'read-write',
    request: (queue) => ({
      path: `/api/v1/consumer-groups/probe/queues/${queue}/partitions/Default/seek`,
      body: { toEnd: true },
    }),
  },
  {
    route: 'GET /api/v1/messages',
    level: 'read-only',
    request: (queue) => ({ path: `/api/v1/messages?queue=${queue}` }),
  },
  {
    route: 'GET /api/v1/messages/:partitionId/:transactionId',
    level: 'read-only',
    request: () => ({ path: `/api/v1/messages/${uuidv7()}/probe` }),
  },
  {
    route: 'DELETE /api/v1/messages/:partitionId/:transactionId',
    level: 'read-write',
    request: () => ({ path: `/api/v1/messages/${uuidv7()}/probe` }),
  },
  {
    route: 'POST /api/v1/messages/:partitionId/:transactionId/retry',
    level: 'read-write',
    request: () => ({ path: `/api/v1/messages/${uuidv7()}/probe/retry` }),
  },
  {
    route: 'POST /api/v1/messages/:partitionId/:transactionId/dlq',
    level: 'read-write',
    request: () => ({ path: `/api/v1/messages/${uuidv7()}/probe/dlq` }),
  },
  {
    route: 'DELETE /api/v1/queues/:queue/clear',
    level: 'admin',
    request: (queue) => ({ path: `/api/v1/queues/${queue}/clear` }),
  },
  {
    route: 'POST /api/v1/traces',
    level: 'read-write',
    request: () => ({ path: '/api/v1/traces', body: { partitionId: uuidv7(), transactionId: 'probe', data: {} } }),
  },
  {
    route: 'GET /api/v1/traces/:partitionId/:transactionId',
    level: 'read-only',
    request: () => ({ path: `/api/v1/traces/${uuidv7()}/probe` }),
  },
  {
    route: 'GET /api/v1/traces/by-name/:name',
    level: 'read-only',
    request: () => ({ path: '/api/v1/traces/by-name/probe' }),
  },
  { route: 'GET /api/v1/traces/names', level: 'read-only', request: () => ({ path: '/api/v1/traces/names' }) },
  { route: 'GET /api/v1/system/maintenance', level: 'admin', request: () => ({ path: '/api/v1/system/maintenance' }) },
  {
    route: 'POST /api/v1/system/maintenance',
    level: 'admin',
    request: () => ({ path: '/api/v1/system/maintenance', body: { enabled: false } }),
  },
  {
    route: 'GET /api/v1/system/maintenance/pop',
    level: 'admin',
    request: () => ({ path: '/api/v1/system/maintenance/pop' }),
  },
  {
    route: 'POST /api/v1/system/maintenance/pop',
    level: 'admin',
    request: () => ({ path: '/api/v1/system/maintenance/pop', body: { enabled: false } }),
  },
];

const DISCOVERED = discoverRoutes(AppModule);

/** An HS256 token for the suite's HS app: issuer and audience set, five minutes of life unless `exp` is given. */
function token(claims: Record<string, unknown>, options: SignOptions = {}, secret = TEST_JWT_SECRET): string {
  const lifetime: SignOptions = 'exp' in claims ? {} : { expiresIn: '5m' };
  return sign(claims, secret, { algorithm: 'HS256', issuer: ISSUER, audience: AUDIENCE, ...lifetime, ...options });
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

function call(
  app: NestExpressApplication,
  method: string,
  path: string,
  { bearer, body, headers = {} }: { bearer?: string; body?: object; headers?: Record<string, string> } = {},
) {
  const verb = method.toLowerCase() as 'get' | 'post' | 'delete' | 'head';
  const pending = request(app.getHttpServer())[verb](path).set(headers);
  if (bearer !== undefined) pending.set('authorization', `Bearer ${bearer}`);
  return body === undefined ? pending : pending.send(body);
}

/** A request with exactly these bytes, so two answers can be compared byte for byte. */
function rawCall(
  app: NestExpressApplication,
  method: string,
  path: string,
  bearer: string,
  body?: object,
): Promise<RawResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${bearer}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return rawRequest(app.getHttpServer(), method, path, headers, body === undefined ? undefined : JSON.stringify(body));
}

/**
 * What a caller can observe about an answer, with the ids it sent swapped
 * for the control request's. Headers that differ on every response
 * (request id, date, etag of the differing id) are compared by name only.
 */
function observable(response: RawResponse, substitutions: Array<[string, string]> = []) {
  let text = response.text;
  for (const [from, to] of substitutions) text = text.split(from).join(to);
  return {
    status: response.status,
    contentType: response.headers['content-type'],
    contentLength: response.headers['content-length'],
    headerNames: Object.keys(response.headers).sort(),
    text,
  };
}

describe('security', () => {
  let app: NestExpressApplication;
  let dataSource: Database;

  beforeAll(async () => {
    app = await createTestApp(HS_ENV);
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  describe('the route table', () => {
    it('has a row for every route the app registers, and none for a route it does not', () => {
      const rows = new Set(ROUTE_TABLE.map((row) => row.route));
      const registered = new Set(DISCOVERED.map((route) => route.key));

      expect([...registered].filter((key) => !rows.has(key))).toEqual([]);
      expect(ROUTE_TABLE.filter((row) => !row.swagger && !registered.has(row.route)).map((row) => row.route)).toEqual(
        [],
      );
    });

    it('matches the access level every registered route declares with @Access', () => {
      const declared = DISCOVERED.map(({ key, level, declared: explicit }) => ({ key, level, explicit }));
      const expected = DISCOVERED.map(({ key }) => ({
        key,
        level: ROUTE_TABLE.find((row) => row.route === key)?.level,
        explicit: true,
      }));

      expect(declared).toEqual(expected);
    });

    it('marks every protected route as bearer-protected in the OpenAPI document, and no public one', async () => {
      const document = (await call(app, 'GET', '/docs-json')).body;
      const security = DISCOVERED.map(({ key, level }) => {
        const [method, path] = key.split(' ');
        const operation = document.paths[path.replace(/:(\w+)/g, '{$1}')]?.[method.toLowerCase()];
        return { key, bearer: (operation?.security ?? []).some((entry: object) => 'bearer' in entry), level };
      });

      expect(security).toEqual(DISCOVERED.map(({ key, level }) => ({ key, bearer: level !== 'public', level })));
    });
  });

  describe('every route, every role', () => {
    for (const row of ROUTE_TABLE) {
      describe(`${row.route} (${row.level})`, () => {
        const send = (bearer?: string) => {
          const { path, body } = row.request(`security-${randomHex()}`);
          return call(app, row.route.split(' ')[0], path, { bearer, body });
        };

        if (row.metricsToken) {
          it('is not served to a token of any role, nor without one, when METRICS_TOKEN is unset', async () => {
            const statuses = await Promise.all(
              [undefined, ...ROLES].map(async (role) => {
                const response = await send(role && token({ role, tenant: newTenant() }));
                return response.status;
              }),
            );

            expect(statuses).toEqual(Array(ROLES.length + 1).fill(404));
          });
          return;
        }

        for (const role of ROLES) {
          if (CONTRACT_ROLES[row.level].includes(role)) {
            it(`lets role ${role} through (neither 401 nor 403)`, async () => {
              const response = await send(token({ role, tenant: newTenant() }));

              expect([401, 403]).not.toContain(response.status);
              expect(response.status).toBeLessThan(500);
            });
          } else {
            it(`refuses role ${role} with 403 Insufficient permissions`, async () => {
              const response = await send(token({ role, tenant: newTenant() }));

              expect(response.status).toBe(403);
              expect(response.body).toEqual({ error: 'Insufficient permissions' });
            });
          }
        }

        if (row.level === 'public') {
          it('answers without a token', async () => {
            const response = await send();

            if (row.refusesMethod) expect(response.status).toBe(405);
            else expect(response.status).toBeLessThan(400);
          });
        } else {
          it('answers 401 Authentication required without a token', async () => {
            const response = await send();

            expect(response.status).toBe(401);
            expect(response.body).toEqual({ error: 'Authentication required' });
            expect(response.headers['www-authenticate']).toBe('Bearer');
          });
        }
      });
    }
  });

  describe('token attacks on POST /api/v1/lease/:leaseId/extend (HS256 with issuer and audience)', () => {
    const tenant = newTenant();
    const claims = { role: 'admin', tenant };

    async function extendWith(bearer: string) {
      const lease = await createLease(app, tenant, [30]);
      const before = await expiries(dataSource, tenant, lease.partitionIds);
      const response = await call(app, 'POST', `/api/v1/lease/${lease.leaseId}/extend`, {
        bearer,
        body: { seconds: 600 },
      });
      return { response, unchanged: (await expiries(dataSource, tenant, lease.partitionIds))[0] === before[0] };
    }

    const unsignedClaims = { ...claims, iss: ISSUER, aud: AUDIENCE };
    const ALGORITHM = 'Invalid token: algorithm not accepted';

    it.each([
      ['a forged signature', () => token(claims, {}, 'not-the-secret'), 'Invalid token: invalid signature'],
      ['an expired token', () => token({ ...claims, exp: nowSeconds() - SKEW_SECONDS - 60 }), 'Token expired'],
      ['a token not yet valid', () => token(claims, { notBefore: SKEW_SECONDS + 60 }), 'Token not yet valid'],
      ['a wrong issuer', () => token(claims, { issuer: 'https://evil.test' }), 'Invalid token: issuer not accepted'],
      [
        'no issuer',
        () => sign(claims, TEST_JWT_SECRET, { audience: AUDIENCE, expiresIn: '5m' }),
        'Invalid token: issuer not accepted',
      ],
      [
        'a wrong audience',
        () => token(claims, { audience: 'another-service' }),
        'Invalid token: audience not accepted',
      ],
      [
        'alg none without a signature',
        () => unsignedToken(unsignedClaims),
        'Invalid token: unsigned tokens are not accepted',
      ],
      ['alg none with a made-up signature', () => unsignedToken(unsignedClaims, 'c2ln'), ALGORITHM],
      ['HS384 with the right secret (pinned to HS256)', () => token(claims, { algorithm: 'HS384' }), ALGORITHM],
      ['an RS256 token', () => rs256TokenFromAnyKey(claims), ALGORITHM],
      ['garbage', () => 'garbage', 'Invalid token: malformed'],
      ['three garbage segments', () => 'a.b.c', 'Invalid token: malformed'],
      [
        'a token without exp',
        () => sign(claims, TEST_JWT_SECRET, { issuer: ISSUER, audience: AUDIENCE }),
        'Invalid token: no expiry (exp)',
      ],
    ])('refuses %s with 401 and a precise reason, leaving the lease alone', async (_case, bearer, reason) => {
      const { response, unchanged } = await extendWith(bearer());

      expect(response.status).toBe(401);
      expect(response.body).toEqual({ error: reason });
      expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      expect(unchanged).toBe(true);
      for (const secret of [ISSUER, AUDIENCE, TEST_JWT_SECRET]) expect(response.text).not.toContain(secret);
    });

    it('refuses an empty Bearer header with 401 Authentication required', async () => {
      const response = await call(app, 'POST', `/api/v1/lease/${uuidv7()}/extend`, {
        headers: { authorization: 'Bearer ' },
      });

      expect(response.status).toBe(401);
      expect(response.body).toEqual({ error: 'Authentication required' });
    });

    it.each([
      ['expired within the clock skew', () => token({ ...claims, exp: nowSeconds() - SKEW_SECONDS + 10 })],
      ['valid from within the clock skew', () => token(claims, { notBefore: SKEW_SECONDS - 10 })],
    ])('accepts a token %s with 200 and renews', async (_case, bearer) => {
      const { response, unchanged } = await extendWith(bearer());

      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      expect(unchanged).toBe(false);
    });

    it('accepts a token minted by the token command for this configuration', async () => {
      const config = app.get<AppConfig>(APP_CONFIG);
      const owner = newTenant();
      const lease = await createLease(app, owner, [30]);
      const { token: minted } = mintToken({ roles: ['read-write'], tenant: owner, ttlSeconds: 60 }, config.jwt);

      const response = await call(app, 'POST', `/api/v1/lease/${lease.leaseId}/extend`, { bearer: minted });

      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ success: true, renewed: 1 });
    });
  });

  describe('tenancy on POST /api/v1/lease/:leaseId/extend', () => {
    const extend = (leaseId: string, bearer: string, headers: Record<string, string> = {}) =>
      call(app, 'POST', `/api/v1/lease/${leaseId}/extend`, { bearer, body: { seconds: 600 }, headers });

    it("answers a foreign lease byte for byte like an unknown id, and leaves the holder's expiry to the microsecond", async () => {
      const owner = newTenant();
      const lease = await createLease(app, owner, [30, 90]);
      const before = await expiries(dataSource, owner, lease.partitionIds);
      const stranger = token({ role: 'admin', tenant: newTenant() });
      const unknownId = uuidv7();
      const path = (id: string) => `/api/v1/lease/${id}/extend`;

      const foreign = await rawCall(app, 'POST', path(lease.leaseId), stranger, { seconds: 600 });
      const unknown = await rawCall(app, 'POST', path(unknownId), stranger, { seconds: 600 });

      expect(lease.leaseId).toHaveLength(unknownId.length);
      expect(foreign.status).toBe(200);
      expect(foreign.text).toBe(
        `{"leaseId":"${lease.leaseId}","success":false,"renewed":0,"newExpiresAt":null,"expiresAt":null,"lease_expires_at":null}`,
      );
      expect(observable(foreign, [[lease.leaseId, unknownId]])).toEqual(observable(unknown));
      expect(await expiries(dataSource, owner, lease.partitionIds)).toEqual(before);
    });

    it('refuses with 403 a gateway header that names another tenant than the token, and renews nothing', async () => {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30]);
      const before = await expiries(dataSource, tenant, lease.partitionIds);

      const response = await extend(lease.leaseId, token({ role: 'read-write', tenant }), {
        [TENANT_HEADER]: newTenant(),
      });

      expect(response.status).toBe(403);
      expect(response.body).toEqual({ error: 'Tenant header does not match token' });
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
    });

    it("renews with 200 when the header repeats the token's tenant", async () => {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30]);

      const response = await extend(lease.leaseId, token({ role: 'read-write', tenant }), {
        [TENANT_HEADER]: tenant.toUpperCase(),
      });

      expect(response.body).toMatchObject({ success: true, renewed: 1 });
    });

    it.each([
      ['without a gateway header', {}],
      ['with a gateway header', { [TENANT_HEADER]: DEFAULT_TENANT_ID }],
    ])(
      'refuses a token without a tenant claim %s with 403 and renews nothing (JWT_REQUIRE_TENANT)',
      async (_case, headers) => {
        const lease = await createLease(app, DEFAULT_TENANT_ID, [30]);
        const before = await expiries(dataSource, DEFAULT_TENANT_ID, lease.partitionIds);

        const response = await extend(lease.leaseId, token({ role: 'read-write' }), headers);

        expect(response.status).toBe(403);
        expect(response.body).toEqual({ error: 'Token has no tenant claim' });
        expect(await expiries(dataSource, DEFAULT_TENANT_ID, lease.partitionIds)).toEqual(before);
      },
    );

    it.each([
      ['a tenant claim that is not a UUID', { role: 'read-write', tenant: 'acme' }, {}],
      ['a tenant claim that is a number', { role: 'read-write', tenant: 42 }, {}],
      ['a tenant claim that is null', { role: 'read-write', tenant: null }, {}],
      ['a gateway header that is not a UUID', { role: 'read-write', tenant: newTenant() }, { [TENANT_HEADER]: 'acme' }],
    ])('answers 400 invalid tenant for %s', async (_case, claims, headers) => {
      const response = await extend(uuidv7(), token(claims), headers);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid tenant' });
    });

    describe('with JWT_REQUIRE_TENANT=false', () => {
      let lenientApp: NestExpressApplication;
      const lenientExtend = (leaseId: string, bearer: string, headers: Record<string, string> = {}) =>
        call(lenientApp, 'POST', `/api/v1/lease/${leaseId}/extend`, { bearer, body: { seconds: 600 }, headers });

      beforeAll(async () => {
        lenientApp = await createTestApp({ ...HS_ENV, JWT_REQUIRE_TENANT: 'false' });
      });

      afterAll(async () => {
        await lenientApp.close();
      });

      it('takes the tenant from the gateway header when the token carries none (200, renewed 1)', async () => {
        const tenant = newTenant();
        const lease = await createLease(app, tenant, [30]);

        const response = await lenientExtend(lease.leaseId, token({ role: 'read-write' }), { [TENANT_HEADER]: tenant });

        expect(response.status).toBe(200);
        expect(response.body).toMatchObject({ success: true, renewed: 1 });
      });

      it('puts a token without tenant and without header in the default tenant', async () => {
        const lease = await createLease(app, DEFAULT_TENANT_ID, [30]);
        const elsewhere = await createLease(app, newTenant(), [30]);

        const own = await lenientExtend(lease.leaseId, token({ role: 'read-write' }));
        const foreign = await lenientExtend(elsewhere.leaseId, token({ role: 'read-write' }));

        expect(own.body).toMatchObject({ success: true, renewed: 1 });
        expect(foreign.body).toMatchObject({ success: false, renewed: 0 });
      });

      it.each([
        ['a gateway header that is not a UUID', { [TENANT_HEADER]: 'acme' }],
        ['an empty gateway header', { [TENANT_HEADER]: '' }],
      ])('answers 400 invalid tenant for %s', async (_case, headers) => {
        const response = await lenientExtend(uuidv7(), token({ role: 'read-write' }), headers);

        expect(response.status).toBe(400);
        expect(response.body).toEqual({ error: 'invalid tenant' });
      });
    });

    describe('without TENANT_HEADER', () => {
      let plainApp: NestExpressApplication;

      beforeAll(async () => {
        plainApp = await createTestApp({ ...HS_ENV, TENANT_HEADER: '', JWT_REQUIRE_TENANT: 'false' });
      });

      afterAll(async () => {
        await plainApp.close();
      });

      it('ignores a tenant header entirely: no 403 for a mismatch, and no tenant from it', async () => {
        const tenant = newTenant();
        const lease = await createLease(app, tenant, [30]);
        const headerTenant = newTenant();
        const headerOnly = await createLease(app, headerTenant, [30]);
        const send = (leaseId: string, claims: object, header: string) =>
          call(plainApp, 'POST', `/api/v1/lease/${leaseId}/extend`, {
            bearer: token({ role: 'read-write', ...claims }),
            headers: { [TENANT_HEADER]: header },
          });

        const mismatch = await send(lease.leaseId, { tenant }, newTenant());
        const malformed = await send(lease.leaseId, { tenant }, 'acme');
        const viaHeader = await send(headerOnly.leaseId, {}, headerTenant);

        expect(mismatch.body).toMatchObject({ success: true, renewed: 1 });
        expect(malformed.status).toBe(200);
        expect(viaHeader.body).toMatchObject({ success: false, renewed: 0 });
      });
    });
  });

  describe('tenancy: queue names are unique per tenant, not globally', () => {
    it('lets two tenants each own a queue called orders, and refuses a second one in the same tenant', async () => {
      const [first, second] = [newTenant(), newTenant()];
      const insert = (tenant: string) =>
        sql(dataSource, "INSERT INTO queues (tenant_id, id, name) VALUES ($1, $2, 'orders')", [tenant, uuidv7()]);

      await insert(first);
      await insert(second);

      await expect(insert(first)).rejects.toThrow(/uq_queues_name/);
    });
  });

  /*
   * For every route that takes a queue, partition, lease or transaction id, a
   * second tenant's request with the owner's ids must answer exactly what the
   * same request with never-used ids of the same shape answers, must not
   * mention anything else the owner has, and must leave every row of the
   * owner's tenant as it was.
   */
  describe('tenancy: foreign ids behave as if they did not exist', () => {
    interface Probe {
      name: string;
      route: string;
      request: (ids: OwnedQueue) => { method: string; path: string; body?: object };
      /** The route mints ids (message ids) of its own; they are masked before comparing. */
      mintsIds?: true;
    }

    const consumerGroup = 'security-probe';
    const probes: Probe[] = [
      {
        name: 'extend the lease',
        route: 'POST /api/v1/lease/:leaseId/extend',
        request: (ids) => ({ method: 'POST', path: `/api/v1/lease/${ids.leaseId}/extend`, body: { seconds: 3600 } }),
      },
      {
        name: 'read the queue',
        route: 'GET /api/v1/resources/queues/:queue',
        request: (ids) => ({ method: 'GET', path: `/api/v1/resources/queues/${ids.queue}` }),
      },
      {
        name: "list the queue's leases",
        route: 'GET /api/v1/resources/queues/:queue/leases',
        request: (ids) => ({ method: 'GET', path: `/api/v1/resources/queues/${ids.queue}/leases` }),
      },
      {
        name: 'list queues',
        route: 'GET /api/v1/resources/queues',
        request: () => ({ method: 'GET', path: '/api/v1/resources/queues' }),
      },
      {
        name: 'pop the queue in a new consumer group',
        route: 'GET /api/v1/pop/queue/:queue',
        request: (ids) => ({ method: 'GET', path: `/api/v1/pop/queue/${ids.queue}?consumerGroup=${consumerGroup}` }),
      },
      {
        name: 'pop the partition in a new consumer group',
        route: 'GET /api/v1/pop/queue/:queue/partition/:partition',
        request: (ids) => ({
          method: 'GET',
          path: `/api/v1/pop/queue/${ids.queue}/partition/${ids.partition}?consumerGroup=${consumerGroup}`,
        }),
      },
      {
        name: 'ack with the lease',
        route: 'POST /api/v1/ack',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/ack',
          body: { transactionId: ids.transactionId, partitionId: ids.partitionId, leaseId: ids.leaseId },
        }),
      },
      {
        name: 'ack without a lease (the unchecked path)',
        route: 'POST /api/v1/ack',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/ack',
          body: { transactionId: ids.transactionId, partitionId: ids.partitionId, status: 'completed' },
        }),
      },
      {
        name: 'nack without a lease',
        route: 'POST /api/v1/ack',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/ack',
          body: { transactionId: ids.transactionId, partitionId: ids.partitionId, status: 'failed', error: 'probe' },
        }),
      },
      {
        name: 'ack a batch',
        route: 'POST /api/v1/ack/batch',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/ack/batch',
          body: {
            acknowledgments: [
              { transactionId: ids.transactionId, partitionId: ids.partitionId, leaseId: ids.leaseId },
              { transactionId: ids.transactionId, partitionId: ids.partitionId, status: 'dlq' },
            ],
          },
        }),
      },
      {
        name: "a transaction acking the owner's message under its lease, and pushing to its queue",
        route: 'POST /api/v1/transaction',
        mintsIds: true,
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/transaction',
          body: {
            operations: [
              { type: 'ack', transactionId: ids.transactionId, partitionId: ids.partitionId, leaseId: ids.leaseId },
              { type: 'push', items: [{ queue: ids.queue, partition: ids.partition, payload: {} }] },
            ],
            requiredLeases: [ids.leaseId],
          },
        }),
      },
      {
        name: "a transaction requiring only the owner's lease",
        route: 'POST /api/v1/transaction',
        mintsIds: true,
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/transaction',
          body: {
            operations: [{ type: 'push', items: [{ queue: ids.queue, payload: {} }] }],
            requiredLeases: [ids.leaseId],
          },
        }),
      },
      {
        name: 'read the dead-letter queue',
        route: 'GET /api/v1/dlq',
        request: (ids) => ({ method: 'GET', path: `/api/v1/dlq?queue=${ids.queue}&consumerGroup=__QUEUE_MODE__` }),
      },
      {
        name: 'configure the queue (creates its own)',
        route: 'POST /api/v1/configure',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/configure',
          body: { queue: ids.queue, options: { leaseTime: 7, retryLimit: 0 } },
        }),
      },
      {
        name: "push with the owner's transaction id (its own queue, not a duplicate)",
        route: 'POST /api/v1/push',
        mintsIds: true,
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/push',
          body: {
            items: [{ queue: ids.queue, partition: ids.partition, payload: {}, transactionId: ids.transactionId }],
          },
        }),
      },
      {
        name: 'delete the queue',
        route: 'DELETE /api/v1/resources/queues/:queue',
        request: (ids) => ({ method: 'DELETE', path: `/api/v1/resources/queues/${ids.queue}` }),
      },
      {
        name: 'browse the queue',
        route: 'GET /api/v1/messages',
        request: (ids) => ({ method: 'GET', path: `/api/v1/messages?queue=${ids.queue}` }),
      },
      {
        name: "read the owner's message",
        route: 'GET /api/v1/messages/:partitionId/:transactionId',
        request: (ids) => ({ method: 'GET', path: `/api/v1/messages/${ids.partitionId}/${ids.transactionId}` }),
      },
      {
        name: "delete the owner's message",
        route: 'DELETE /api/v1/messages/:partitionId/:transactionId',
        request: (ids) => ({ method: 'DELETE', path: `/api/v1/messages/${ids.partitionId}/${ids.transactionId}` }),
      },
      {
        name: "retry the owner's message",
        route: 'POST /api/v1/messages/:partitionId/:transactionId/retry',
        request: (ids) => ({ method: 'POST', path: `/api/v1/messages/${ids.partitionId}/${ids.transactionId}/retry` }),
      },
      {
        name: "move the owner's message to the dead-letter queue",
        route: 'POST /api/v1/messages/:partitionId/:transactionId/dlq',
        request: (ids) => ({ method: 'POST', path: `/api/v1/messages/${ids.partitionId}/${ids.transactionId}/dlq` }),
      },
      {
        name: "trace the owner's message",
        route: 'POST /api/v1/traces',
        request: (ids) => ({
          method: 'POST',
          path: '/api/v1/traces',
          body: { partitionId: ids.partitionId, transactionId: ids.transactionId, data: { probe: true } },
        }),
      },
      {
        name: "read the owner's message's traces",
        route: 'GET /api/v1/traces/:partitionId/:transactionId',
        request: (ids) => ({ method: 'GET', path: `/api/v1/traces/${ids.partitionId}/${ids.transactionId}` }),
      },
      {
        name: "clear the owner's queue",
        route: 'DELETE /api/v1/queues/:queue/clear',
        request: (ids) => ({ method: 'DELETE', path: `/api/v1/queues/${ids.queue}/clear` }),
      },
      {
        name: 'list consumer groups',
        route: 'GET /api/v1/consumer-groups',
        request: () => ({ method: 'GET', path: '/api/v1/consumer-groups' }),
      },
      {
        name: 'list lagging consumer groups',
        route: 'GET /api/v1/consumer-groups/lagging',
        request: () => ({ method: 'GET', path: '/api/v1/consumer-groups/lagging?minLagSeconds=0' }),
      },
      {
        name: "read the owner's consumer group",
        route: 'GET /api/v1/consumer-groups/:group',
        request: () => ({ method: 'GET', path: `/api/v1/consumer-groups/${OWNED_CONSUMER_GROUP}` }),
      },
      {
        name: "seek the owner's consumer group on its queue",
        route: 'POST /api/v1/consumer-groups/:group/queues/:queue/seek',
        request: (ids) => ({
          method: 'POST',
          path: `/api/v1/consumer-groups/${OWNED_CONSUMER_GROUP}/queues/${ids.queue}/seek`,
          body: { timestamp: '2000-01-01T00:00:00Z' },
        }),
      },
      {
        name: "seek the owner's consumer group on its partition",
        route: 'POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek',
        request: (ids) => ({
          method: 'POST',
          path: `/api/v1/consumer-groups/${OWNED_CONSUMER_GROUP}/queues/${ids.queue}/partitions/${ids.partition}/seek`,
          body: { toEnd: true },
        }),
      },
      {
        name: "forget the owner's consumer group on its queue",
        route: 'DELETE /api/v1/consumer-groups/:group/queues/:queue',
        request: (ids) => ({
          method: 'DELETE',
          path: `/api/v1/consumer-groups/${OWNED_CONSUMER_GROUP}/queues/${ids.queue}`,
        }),
      },
      {
        name: "forget the owner's consumer group everywhere",
        route: 'DELETE /api/v1/consumer-groups/:group',
        request: () => ({ method: 'DELETE', path: `/api/v1/consumer-groups/${OWNED_CONSUMER_GROUP}` }),
      },
    ];

    /** Ids of the same shape and length as the owner's, that nobody has. */
    const unknownLike = (owned: OwnedQueue): OwnedQueue => ({
      ...owned,
      queue: `orders-${randomHex()}`,
      queueId: uuidv7(),
      partitionId: uuidv7(),
      leaseId: uuidv7(),
      transactionId: `tx-${randomHex()}`,
    });

    const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
    const TIMESTAMP = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3,6}Z/g;

    for (const probe of probes) {
      describe(`${probe.route}: ${probe.name}`, () => {
        it("answers as for unknown ids, mentions nothing of the owner's and changes none of its rows", async () => {
          const owner = newTenant();
          const owned = await createOwnedQueue(dataSource, owner);
          const unknown = unknownLike(owned);
          const before = await tenantSnapshot(dataSource, owner);
          const stranger = token({ role: 'admin', tenant: newTenant() });
          const send = (ids: OwnedQueue) => {
            const { method, path, body } = probe.request(ids);
            return rawCall(app, method, path, stranger, body);
          };

          const foreign = await send(owned);
          const control = await send(unknown);

          const substitutions: Array<[string, string]> = [
            [owned.queue, unknown.queue],
            [owned.partitionId, unknown.partitionId],
            [owned.leaseId, unknown.leaseId],
            [owned.transactionId, unknown.transactionId],
          ];
          const seen = (response: RawResponse, swaps: Array<[string, string]> = []) => {
            const view = observable(response, swaps);
            return probe.mintsIds
              ? { ...view, text: view.text.replace(UUID, '<id>').replace(TIMESTAMP, '<time>') }
              : view;
          };
          expect(seen(foreign, substitutions)).toEqual(seen(control));
          for (const secret of [owned.queueId, ...owned.messageIds, owned.payloadMarker]) {
            expect(foreign.text).not.toContain(secret);
          }
          expect(await tenantSnapshot(dataSource, owner)).toEqual(before);
        });
      });
    }
  });
});
