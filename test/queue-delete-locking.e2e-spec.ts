import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { BrokerClient, PopBody } from './support/broker-client';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { waitForValue } from './support/wait';

/** Backends of this database that wait for a lock held by one of `holders`. */
async function waitingOn(dataSource: Database, holders: number[]): Promise<number[]> {
  const rows: Array<{ pid: number }> = await dataSource.query(
    `SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND pg_blocking_pids(pid) && $1::int[]
      ORDER BY pid`,
    [holders],
  );
  return rows.map((row) => row.pid);
}

// PGlite runs one transaction at a time: it has no lock waits to order.
(onEmbeddedDatabase ? describe.skip : describe)('DELETE /api/v1/resources/queues/:queue under concurrent acks', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let client: BrokerClient;

  beforeAll(async () => {
    app = await createTestApp({ DB_POOL_SIZE: '8' });
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    client = new BrokerClient(app, newTenant());
  });

  it('answers 200 to the delete and to a dead-lettering ack that meet on the queue row, with no deadlock', async () => {
    await client.configure({ queue: 'orders', options: { retryLimit: 0 } });
    await client.pushMany('orders', 1);
    const lease: PopBody = (await client.pop('orders')).body;

    // Holds the queue row so the delete queues up behind it first; then the
    // ack arrives. Released, the two meet exactly as when a delete lands
    // between an ack's cursor lock and its dead-letter insert.
    const holder = new HeldConnection(dataSource);
    await holder.connect();
    try {
      await holder.startTransaction();
      const [{ pid: holderPid }] = await holder.query('SELECT pg_backend_pid() AS pid');
      await holder.query('SELECT 1 FROM queues WHERE tenant_id = $1 AND name = $2 FOR UPDATE', [
        client.tenant,
        'orders',
      ]);

      const deleting = client.delete('/api/v1/resources/queues/orders').then((response) => response);
      const [deletePid] = await waitForValue(async () => {
        const pids = await waitingOn(dataSource, [holderPid]);
        return pids.length === 1 ? pids : undefined;
      }, 'the delete waits for the held queue row');
      const acking = client
        .ack({
          transactionId: lease.messages[0].transactionId,
          partitionId: lease.partitionId,
          leaseId: lease.leaseId,
          status: 'failed',
          error: 'boom',
        })
        .then((response) => response);
      await waitForValue(async () => {
        const pids = (await waitingOn(dataSource, [holderPid, deletePid])).filter((pid) => pid !== deletePid);
        return pids.length === 1 ? pids : undefined;
      }, 'the ack waits behind the holder or the delete');

      await holder.commitTransaction();
      const [deleted, acked] = await Promise.all([deleting, acking]);

      expect(deleted.status).toBe(200);
      expect(deleted.body).toEqual({ deleted: true, queue: 'orders', existed: true });
      expect(acked.status).toBe(200);
      expect(acked.body).toHaveLength(1);
    } finally {
      if (holder.isTransactionActive) await holder.rollbackTransaction();
      await holder.release();
    }
  });
});
