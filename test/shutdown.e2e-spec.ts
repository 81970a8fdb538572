import { Client } from 'pg';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { createLease } from './support/lease-fixture';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';

// Holding a request in flight needs a row lock from another session, which
// only real PostgreSQL has.
(onEmbeddedDatabase ? describe.skip : describe)('graceful shutdown', () => {
  it('lets an in-flight extend finish with 200 before closing the pool, then refuses new connections', async () => {
    const app = await createTestApp();
    await app.listen(0, '127.0.0.1');
    const server = app.getHttpServer();
    const dataSource = app.get(DataSource);
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    const blocker = new Client({ connectionString: process.env.DATABASE_URL });
    // pg_stat_activity is a snapshot per transaction: watch from outside the blocker's.
    const observer = new Client({ connectionString: process.env.DATABASE_URL });
    await blocker.connect();
    await observer.connect();
    let closing: Promise<void> | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM consumers WHERE tenant_id = $1 FOR UPDATE', [tenant]);
      const inFlight = request(server)
        .post(`/api/v1/lease/${lease.leaseId}/extend`)
        .set(TENANT_HEADER, tenant)
        .send({ seconds: 120 })
        .then((response) => response);
      await waitForLockWaiter(observer, tenant);

      closing = app.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(dataSource.isInitialized).toBe(true);
      await blocker.query('ROLLBACK');

      const response = await inFlight;
      await closing;
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      expect(dataSource.isInitialized).toBe(false);
      expect(server.listening).toBe(false);
    } finally {
      await blocker.end();
      await observer.end();
      await (closing ?? app.close());
    }
  });
});

/** Waits until some session is blocked on a lock, i.e. the request is in flight inside PostgreSQL. */
async function waitForLockWaiter(client: Client, tenant: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const { rows } = await client.query(
      `SELECT count(*)::int AS waiting FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%locked AS (%'`,
    );
    if (rows[0].waiting > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no request blocked on the lock held for tenant ${tenant}`);
}
