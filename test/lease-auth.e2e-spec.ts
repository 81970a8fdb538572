import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { createLease, expiries } from './support/lease-fixture';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';

describe('lease route with authentication on', () => {
  let app: NestExpressApplication;
  let dataSource: DataSource;

  beforeAll(async () => {
    app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET });
    dataSource = app.get(DataSource);
  });

  afterAll(async () => {
    await app.close();
  });

  const extend = (leaseId: string, token?: string) => {
    const call = request(app.getHttpServer()).post(`/api/v1/lease/${leaseId}/extend`).send({ seconds: 120 });
    return token ? call.set('authorization', `Bearer ${token}`) : call;
  };

  it('returns 401 "Authentication required" without a token', async () => {
    const response = await extend('0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90');

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: 'Authentication required' });
  });

  it('returns 401 for a token signed with another secret', async () => {
    const response = await extend(
      '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
      hsToken({ role: 'read-write' }, {}, 'some-other-secret'),
    );

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: 'Invalid token: invalid signature' });
  });

  it.each(['read-only', 'write-only'])(
    'returns 403 "Insufficient permissions" for role %s and leaves the lease alone',
    async (role) => {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30]);
      const before = await expiries(dataSource, tenant, lease.partitionIds);

      const response = await extend(lease.leaseId, hsToken({ role, tenant }));

      expect(response.status).toBe(403);
      expect(response.body).toEqual({ error: 'Insufficient permissions' });
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
    },
  );

  it.each([
    ['role read-write', { role: 'read-write' }],
    ['role admin', { role: 'admin' }],
    ['roles array with read-write', { roles: ['read-only', 'read-write'] }],
  ])('returns 200 and renews for %s in the token tenant', async (_case, claims) => {
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);

    const response = await extend(lease.leaseId, hsToken({ ...claims, tenant }));

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ success: true, renewed: 1 });
  });

  it("returns renewed 0 for a lease of a tenant other than the token's", async () => {
    const owner = newTenant();
    const lease = await createLease(app, owner, [30]);
    const before = await expiries(dataSource, owner, lease.partitionIds);

    const response = await extend(lease.leaseId, hsToken({ role: 'admin', tenant: newTenant() }));

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ success: false, renewed: 0, newExpiresAt: null });
    expect(await expiries(dataSource, owner, lease.partitionIds)).toEqual(before);
  });
});
