import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { storedCounts } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';

type Role = 'read-only' | 'write-only' | 'read-write' | 'admin';

interface Route {
  name: string;
  allowed: Role[];
  call: (http: ReturnType<typeof request>) => request.Test;
}

const ANY_UUID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const ROUTES: Route[] = [
  {
    name: 'POST /api/v1/push',
    allowed: ['write-only', 'read-write', 'admin'],
    call: (http) => http.post('/api/v1/push').send({ items: [{ queue: 'q', payload: 1 }] }),
  },
  {
    name: 'GET /api/v1/pop/queue/:queue',
    allowed: ['read-write', 'admin'],
    call: (http) => http.get('/api/v1/pop/queue/q'),
  },
  {
    name: 'GET /api/v1/pop/queue/:queue/partition/:partition',
    allowed: ['read-write', 'admin'],
    call: (http) => http.get('/api/v1/pop/queue/q/partition/Default'),
  },
  {
    name: 'POST /api/v1/ack',
    allowed: ['read-write', 'admin'],
    call: (http) => http.post('/api/v1/ack').send({ transactionId: 't', partitionId: ANY_UUID }),
  },
  {
    name: 'POST /api/v1/ack/batch',
    allowed: ['read-write', 'admin'],
    call: (http) => http.post('/api/v1/ack/batch').send({ acknowledgments: [] }),
  },
  {
    name: 'POST /api/v1/configure',
    allowed: ['read-write', 'admin'],
    call: (http) => http.post('/api/v1/configure').send({ queue: 'q' }),
  },
  {
    name: 'GET /api/v1/resources/queues',
    allowed: ['read-only', 'read-write', 'admin'],
    call: (http) => http.get('/api/v1/resources/queues'),
  },
  {
    name: 'GET /api/v1/resources/queues/:queue',
    allowed: ['read-only', 'read-write', 'admin'],
    call: (http) => http.get('/api/v1/resources/queues/q'),
  },
  {
    name: 'DELETE /api/v1/resources/queues/:queue',
    allowed: ['admin'],
    call: (http) => http.delete('/api/v1/resources/queues/q'),
  },
  { name: 'GET /api/v1/dlq', allowed: ['read-only', 'read-write', 'admin'], call: (http) => http.get('/api/v1/dlq') },
  {
    name: 'POST /api/v1/traces',
    allowed: ['read-write', 'admin'],
    call: (http) => http.post('/api/v1/traces').send({ transactionId: 't', partitionId: ANY_UUID, data: {} }),
  },
  {
    name: 'GET /api/v1/traces/:partitionId/:transactionId',
    allowed: ['read-only', 'read-write', 'admin'],
    call: (http) => http.get(`/api/v1/traces/${ANY_UUID}/t`),
  },
  {
    name: 'GET /api/v1/traces/by-name/:name',
    allowed: ['read-only', 'read-write', 'admin'],
    call: (http) => http.get('/api/v1/traces/by-name/n'),
  },
  {
    name: 'GET /api/v1/traces/names',
    allowed: ['read-only', 'read-write', 'admin'],
    call: (http) => http.get('/api/v1/traces/names'),
  },
];
const ROLES: Role[] = ['read-only', 'write-only', 'read-write', 'admin'];

describe('message routes with authentication on', () => {
  let app: NestExpressApplication;
  let dataSource: Database;

  beforeAll(async () => {
    app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET });
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  const as = (token: string, route: Route) =>
    route.call(request(app.getHttpServer())).set('authorization', `Bearer ${token}`);

  const cases = ROUTES.flatMap((route) =>
    ROLES.map((role) => [route.name, role, route.allowed.includes(role)] as const),
  );

  it.each(cases)('%s with role %s: allowed %p', async (name, role, allowed) => {
    const tenant = newTenant();
    const route = ROUTES.find((candidate) => candidate.name === name)!;

    const response = await as(hsToken({ role, tenant }), route);

    if (allowed) {
      expect([401, 403]).not.toContain(response.status);
      expect(response.status).toBeLessThan(500);
    } else {
      expect(response.status).toBe(403);
      expect(response.body).toEqual({ error: 'Insufficient permissions' });
      expect(await storedCounts(dataSource, tenant)).toMatchObject({ queues: 0, messages: 0, consumers: 0 });
    }
  });

  it.each(ROUTES.map((route) => [route.name]))('%s answers 401 without a token', async (name) => {
    const route = ROUTES.find((candidate) => candidate.name === name)!;

    const response = await route.call(request(app.getHttpServer()));

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: 'Authentication required' });
  });

  it("records the pushing token's subject as producerSub and keeps each token's tenant to itself", async () => {
    const tenant = newTenant();
    const producer = hsToken({ role: 'write-only', tenant, sub: 'producer-7' });
    const consumer = hsToken({ role: 'read-write', tenant, sub: 'consumer-1' });
    const stranger = hsToken({ role: 'admin', tenant: newTenant() });
    const http = () => request(app.getHttpServer());

    await http()
      .post('/api/v1/push')
      .set('authorization', `Bearer ${producer}`)
      .send({ items: [{ queue: 'q', payload: 1 }] });
    const foreign = await http().get('/api/v1/pop/queue/q').set('authorization', `Bearer ${stranger}`);
    const own = await http().get('/api/v1/pop/queue/q').set('authorization', `Bearer ${consumer}`);

    expect(foreign.status).toBe(204);
    expect(own.status).toBe(200);
    expect(own.body.messages[0].producerSub).toBe('producer-7');
  });
});
