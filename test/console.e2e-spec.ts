import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { CONSOLE_DIR } from '../src/console/console-paths';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';

describe('web console', () => {
  it('is built (npm ci runs npm run build:console)', () => {
    expect(existsSync(join(CONSOLE_DIR, 'index.html'))).toBe(true);
  });

  describe('served', () => {
    const broker = useTestBroker();

    it('at /console/, with a policy that lets it load only itself and talk only to this origin', async () => {
      const server = broker.app.getHttpServer();
      await request(server).get('/console').expect(301).expect('location', '/console/');
      const page = await request(server)
        .get('/console/')
        .expect(200)
        .expect('content-type', /text\/html/);
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).toContain("connect-src 'self'");
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['cache-control']).toBe('no-cache');
      expect(page.text).toContain('<div id="app">');

      const script = /src="(assets\/[^"]+\.js)"/.exec(page.text)![1];
      const asset = await request(server).get(`/console/${script}`).expect(200);
      expect(asset.headers['content-type']).toMatch(/javascript/);
      expect(asset.headers['cache-control']).toContain('immutable');
      expect(readdirSync(join(CONSOLE_DIR, 'assets'))).toContain(script.replace('assets/', ''));
    });

    it('answers paths it does not have like any unknown route, and leaves the API alone', async () => {
      const server = broker.app.getHttpServer();
      const missing = await request(server).get('/console/nothing-here.js').expect(404);
      expect(missing.body).toEqual({ error: expect.any(String) });
      await request(server).post('/console/').expect(404);
      await request(server).get('/console/../package.json').expect(404);
      await broker.client.pushMany('beside-console', 1);
    });
  });

  it('is not served with CONSOLE_ENABLED=false', async () => {
    const app = await createTestApp({ CONSOLE_ENABLED: 'false' });
    try {
      const answer = await request(app.getHttpServer()).get('/console/').expect(404);
      expect(answer.body).toEqual({ error: expect.any(String) });
    } finally {
      await app.close();
    }
  });
});

describe('GET /api/v1/whoami', () => {
  describe('auth off', () => {
    const broker = useTestBroker();

    it("answers the header's tenant and every role", async () => {
      const tenant = newTenant();
      const answer = await request(broker.app.getHttpServer())
        .get('/api/v1/whoami')
        .set(TENANT_HEADER, tenant)
        .expect(200);
      expect(answer.body).toEqual({
        tenant,
        roles: ['read-only', 'write-only', 'read-write', 'admin'],
        subject: null,
        authEnabled: false,
        expiresAt: null,
      });
    });
  });

  describe('auth on', () => {
    const broker = useTestBroker({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET });

    it("answers the token's tenant, roles, subject and expiry, to any role", async () => {
      const tenant = newTenant();
      const token = hsToken({ tenant, role: 'write-only', sub: 'ingest' }, { expiresIn: '10m' });
      const answer = await request(broker.app.getHttpServer())
        .get('/api/v1/whoami')
        .set('authorization', `Bearer ${token}`)
        .expect(200);
      expect(answer.body).toMatchObject({ tenant, roles: ['write-only'], subject: 'ingest', authEnabled: true });
      const expiresInMs = Date.parse(answer.body.expiresAt) - Date.now();
      expect(expiresInMs).toBeGreaterThan(8 * 60_000);
      expect(expiresInMs).toBeLessThanOrEqual(10 * 60_000);
    });

    it('refuses a caller without a token', async () => {
      const answer = await request(broker.app.getHttpServer()).get('/api/v1/whoami').expect(401);
      expect(answer.body).toEqual({ error: 'Authentication required' });
    });
  });
});

describe('GET /api/v1/resources/queues/:queue/leases', () => {
  const broker = useTestBroker();
  const leasesOf = (queue: string, query = '') => broker.client.get(`/api/v1/resources/queues/${queue}/leases${query}`);

  it('lists live leases, soonest expiry first, showing only the end of each lease id', async () => {
    const { client } = broker;
    for (const partition of ['p0', 'p1']) await client.pushMany('work', 1, partition);
    const later = await client.popLeased('work', { leaseSeconds: 300 }, 'p0');
    const sooner = await client.popLeased('work', { leaseSeconds: 60, consumerGroup: 'audit' }, 'p1');

    const answer = await leasesOf('work').expect(200);
    expect(answer.body.truncated).toBe(false);
    expect(answer.body.leases).toEqual([
      expect.objectContaining({ consumerGroup: 'audit', partition: 'p1', messages: 1, epoch: 1, renewals: 0 }),
      expect.objectContaining({ consumerGroup: '__QUEUE_MODE__', partition: 'p0', messages: 1, renewals: 0 }),
    ]);
    const [first, second] = answer.body.leases;
    expect(first.leaseIdHint).toBe(`…${sooner.leaseId!.slice(-4)}`);
    expect(second.leaseIdHint).toBe(`…${later.leaseId!.slice(-4)}`);
    expect(JSON.stringify(answer.body)).not.toContain(sooner.leaseId);
    expect(JSON.stringify(answer.body)).not.toContain(later.leaseId);
    expect(first.remainingMs).toBeGreaterThan(30_000);
    expect(first.remainingMs).toBeLessThanOrEqual(60_000);
    expect(Math.abs(Date.parse(first.expiresAt) - Date.parse(answer.body.now) - first.remainingMs)).toBeLessThanOrEqual(
      1,
    );
    expect([first.lastRenewedAt, first.lastRenewalSlackMs]).toEqual([null, null]);
  });

  it('counts renewals and the time a lease had left at the last one; a new claim starts again', async () => {
    const { client } = broker;
    await client.pushMany('renewed', 2);
    const lease = await client.popLeased('renewed', { leaseSeconds: 60, batch: 1 });
    await client.extend(lease.leaseId!, 120).expect(200);
    await client.extend(lease.leaseId!, 120).expect(200);

    const [renewed] = (await leasesOf('renewed').expect(200)).body.leases;
    expect(renewed.renewals).toBe(2);
    expect(renewed.lastRenewalSlackMs).toBeGreaterThan(60_000);
    expect(renewed.lastRenewalSlackMs).toBeLessThanOrEqual(120_000);
    expect(renewed.lastRenewedAt).not.toBeNull();

    await client.ackAll(lease).expect(200);
    expect((await leasesOf('renewed').expect(200)).body.leases).toEqual([]);
    await client.popLeased('renewed', { batch: 1 });
    const [next] = (await leasesOf('renewed').expect(200)).body.leases;
    expect([next.epoch, next.renewals, next.lastRenewalSlackMs]).toEqual([2, 0, null]);
  });

  it('stops at limit and says so; refuses a bad limit and an unknown queue', async () => {
    const { client } = broker;
    for (const partition of ['p0', 'p1', 'p2']) await client.pushMany('many', 1, partition);
    for (const partition of ['p0', 'p1', 'p2']) await client.popLeased('many', {}, partition);

    const page = await leasesOf('many', '?limit=2').expect(200);
    expect([page.body.leases.length, page.body.truncated]).toEqual([2, true]);
    expect((await leasesOf('many', '?limit=0').expect(400)).body).toEqual({
      error: 'limit must be an integer between 1 and 1000',
    });
    expect((await leasesOf('nowhere').expect(404)).body).toEqual({ error: 'queue not found' });
  });

  it("shows another tenant's queue as unknown", async () => {
    const { client, app } = broker;
    await client.pushMany('mine', 1);
    await client.popLeased('mine');
    const stranger = await request(app.getHttpServer())
      .get('/api/v1/resources/queues/mine/leases')
      .set(TENANT_HEADER, newTenant())
      .expect(404);
    expect(stranger.body).toEqual({ error: 'queue not found' });
  });
});
