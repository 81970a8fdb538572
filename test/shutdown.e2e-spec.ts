import request from 'supertest';
import { Database } from '../src/database/database';
import { createLease } from './support/lease-fixture';
import { lockTenantRows, openSession } from './support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';
import { ACK_ON_ITS_CURSOR, waitForLockWaiter } from './support/wait';

// Holding a request in flight needs a row lock from another session, which
// only real PostgreSQL has.
(onEmbeddedDatabase ? describe.skip : describe)('graceful shutdown', () => {
  it('lets an in-flight ack finish with 200 before closing the pool, then refuses new connections', async () => {
    const app = await createTestApp();
    await app.listen(0, '127.0.0.1');
    const server = app.getHttpServer();
    const dataSource = app.get(Database);
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    const blocker = await openSession();
    // pg_stat_activity is a snapshot per transaction: watch from outside the blocker's.
    const observer = await openSession();
    let closing: Promise<void> | undefined;
    try {
      await lockTenantRows(blocker, 'consumers', tenant);
      // An ack waits for the row lock (a renewal would skip it).
      const inFlight = request(server)
        .post('/api/v1/ack')
        .set(TENANT_HEADER, tenant)
        .send({ ...lease.messages[0], leaseId: lease.leaseId })
        .then((response) => response);
      await waitForLockWaiter(observer, ACK_ON_ITS_CURSOR);

      closing = app.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(dataSource.pool.ended).toBe(false);
      await blocker.query('ROLLBACK');

      const response = await inFlight;
      await closing;
      expect(response.status).toBe(200);
      expect(response.body).toEqual([expect.objectContaining({ success: true, leaseReleased: true })]);
      expect(dataSource.pool.ended).toBe(true);
      expect(server.listening).toBe(false);
    } finally {
      await blocker.end();
      await observer.end();
      await (closing ?? app.close());
    }
  });
});
