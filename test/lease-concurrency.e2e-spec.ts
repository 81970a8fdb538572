import { Agent } from 'node:http';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { createLease, expiries } from './support/lease-fixture';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';

// Row-lock contention only exists on real PostgreSQL: PGlite runs one
// transaction at a time.
(onEmbeddedDatabase ? describe.skip : describe)('concurrent renewals on real PostgreSQL', () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });

  afterAll(() => agent.destroy());

  const scenarios: Array<[string, Record<string, string>]> = [
    ['with group commit', { LEASE_RENEWAL_CONCURRENCY: '8', DB_POOL_SIZE: '10' }],
    // Every request its own statement, all racing for the same rows: only the
    // lock order keeps this free of deadlocks.
    [
      'one statement per request',
      { LEASE_RENEWAL_CONCURRENCY: '10', LEASE_RENEWAL_BATCH_SIZE: '1', DB_POOL_SIZE: '10' },
    ],
  ];

  describe.each(scenarios)('%s', (_name, env) => {
    let app: NestExpressApplication;
    let dataSource: Database;

    beforeAll(async () => {
      app = await createTestApp({ ...env, DB_ACQUIRE_TIMEOUT_MS: '10000' });
      await app.listen(0, '127.0.0.1');
      dataSource = app.get(Database);
    });

    afterAll(async () => {
      await app.close();
    });

    const extend = (tenant: string, leaseId: string, seconds: number) =>
      request(app.getHttpServer())
        .post(`/api/v1/lease/${leaseId}/extend`)
        .agent(agent)
        .set(TENANT_HEADER, tenant)
        .send({ seconds });

    it('answers 300 concurrent extends of one 8-partition lease with 200 and renewed 8, without deadlock', async () => {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30, 30, 30, 30, 30, 30, 30, 30]);

      const responses = await Promise.all(
        Array.from({ length: 300 }, (_unused, index) => extend(tenant, lease.leaseId, 100 + (index % 50))),
      );

      for (const response of responses) {
        expect(response.status).toBe(200);
        expect(response.body).toMatchObject({ success: true, renewed: 8 });
      }
      const rows = await expiries(dataSource, tenant, lease.partitionIds);
      const latestAnswer = responses
        .map((response) => response.body.newExpiresAt as string)
        .sort()
        .pop();
      // The stored expiry is the one the last renewal reported.
      expect([...rows].sort()[0]).toBe(latestAnswer);
    });

    it('gives each of many concurrent requests across tenants its own exact answer', async () => {
      const tenants = [newTenant(), newTenant(), newTenant()];
      const leases = await Promise.all(
        tenants.map((tenant, index) =>
          createLease(
            app,
            tenant,
            Array.from({ length: index + 1 }, () => 30),
          ),
        ),
      );

      const calls = Array.from({ length: 120 }, (_unused, index) => {
        const owner = index % 3;
        // Every fourth call presents a lease of another tenant: it must renew nothing.
        const asTenant = index % 4 === 0 ? tenants[(owner + 1) % 3] : tenants[owner];
        return { owner, asTenant, promise: extend(asTenant, leases[owner].leaseId, 120) };
      });
      const responses = await Promise.all(calls.map((call) => call.promise));

      responses.forEach((response, index) => {
        const { owner, asTenant } = calls[index];
        const expected = asTenant === tenants[owner] ? owner + 1 : 0;
        expect(response.status).toBe(200);
        expect(response.body.renewed).toBe(expected);
        expect(response.body.success).toBe(expected > 0);
        expect(response.body.newExpiresAt === null).toBe(expected === 0);
      });
    });
  });

  it('serves renewal through the partial lease index, with renewals eligible for HOT updates', async () => {
    const app = await createTestApp();
    try {
      const dataSource = app.get(Database);
      const [definition] = await dataSource.query(
        `SELECT indexdef FROM pg_indexes WHERE tablename = 'consumers' AND indexname = 'idx_consumers_lease'`,
      );
      expect(definition.indexdef).toMatch(/\(tenant_id, lease_id\).*WHERE \(lease_id IS NOT NULL\)/);
      // Renewals change only lease_expires_at: kept out of every index and with
      // room left in each page, they can be HOT updates that write no index entry.
      expect(definition.indexdef).not.toContain('lease_expires_at');
      const [table] = await dataSource.query(`SELECT reloptions FROM pg_class WHERE relname = 'consumers'`);
      expect(table.reloptions).toContain('fillfactor=70');

      const runner = new HeldConnection(dataSource);
      await runner.connect();
      try {
        await runner.query('SET enable_seqscan = off');
        const plan: Array<{ 'QUERY PLAN': string }> = await runner.query(
          `EXPLAIN SELECT 1 FROM consumers AS c
             JOIN (SELECT $1::uuid AS tenant_id, $2::uuid AS lease_id) AS w
               ON c.tenant_id = w.tenant_id AND c.lease_id = w.lease_id
            WHERE c.lease_id IS NOT NULL AND c.lease_expires_at > now()`,
          [newTenant(), newTenant()],
        );
        expect(plan.map((row) => row['QUERY PLAN']).join('\n')).toContain('idx_consumers_lease');
      } finally {
        await runner.release();
      }
    } finally {
      await app.close();
    }
  });
});
