import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { Database } from '../src/database/database';
import { uuidv7 } from '../src/common/uuid';
import { nothing, sql, statement } from '../src/database/statement';
import { TransactionRunner } from '../src/database/transaction-runner';
import { PopRepository } from '../src/pop/pop.repository';
import { QueuesRepository } from '../src/queues/queues.repository';
import { BrokerClient } from './support/broker-client';
import { createLease, expiries } from './support/lease-fixture';
import { lockTenantRows, openSession } from './support/pg-session';
import { sleep } from './support/sleep';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { ACK_ON_ITS_CURSOR, waitFor, waitForLockWaiter } from './support/wait';

/** Seconds from b to a, both as PostgreSQL reads them. */
async function secondsBetween(observer: Client, a: string | Date, b: string | Date): Promise<number> {
  const { rows } = await observer.query('SELECT extract(epoch FROM $1::timestamptz - $2::timestamptz) AS s', [a, b]);
  return Number(rows[0].s);
}

// A transaction that started long ago and a statement that waits for a row
// lock both need sessions that run side by side: real PostgreSQL only.
(onEmbeddedDatabase ? describe.skip : describe)(
  'lease expiries are set by the clock when the claim or renewal runs',
  () => {
    let app: NestExpressApplication;
    let blocker: Client;
    let observer: Client;

    beforeAll(async () => {
      app = await createTestApp();
      blocker = await openSession();
      observer = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await observer.end();
      await app.close();
    });

    async function leaseExpired(tenant: string): Promise<void> {
      await waitFor(async () => {
        const { rows } = await observer.query(
          'SELECT bool_and(lease_expires_at < clock_timestamp()) AS expired FROM consumers WHERE tenant_id = $1',
          [tenant],
        );
        return rows[0].expired === true;
      }, 'the lease expires');
    }

    /** Holds the tenant's consumer rows locked until the returned release() runs. */
    async function lockConsumers(tenant: string): Promise<{ release: () => Promise<Date> }> {
      await lockTenantRows(blocker, 'consumers', tenant);
      return {
        release: async () => {
          const { rows } = await blocker.query('SELECT clock_timestamp() AS at');
          await blocker.query('ROLLBACK');
          return rows[0].at as Date;
        },
      };
    }

    it('counts a claimed lease from the claim, not from the start of a transaction that began 1.5 s earlier', async () => {
      const tenant = newTenant();
      await new BrokerClient(app, tenant).pushMany('clock', 1);
      const queues = app.get(QueuesRepository);
      const pops = app.get(PopRepository);

      const afterStart = await app.get(TransactionRunner).read(tenant, async (reader) => {
        await reader.run(statement(sql`SELECT pg_sleep(1.5)`, nothing));
        const queue = (await reader.run(queues.find(tenant, 'clock')))!;
        await pops.ensureGroup(reader, tenant, queue.id, '__QUEUE_MODE__', { newOnly: false, from: undefined });
        await reader.run(pops.backfill(tenant, queue.id, '__QUEUE_MODE__', 100));
        const request = {
          queueId: queue.id,
          partitionId: undefined,
          consumerGroup: '__QUEUE_MODE__',
          batch: 1,
          leaseTime: queue.options.leaseTime as number,
          delayedProcessing: 0,
          windowBuffer: 0,
          retryDelayMs: 0,
        };
        await reader.run(
          pops.claim(tenant, {
            ...request,
            leaseId: uuidv7(),
            leaseSeconds: 10,
            maxPartitions: 1,
            autoAck: false,
            maxBytes: 1024 ** 2,
          }),
        );
        return reader.run(
          statement(
            sql`SELECT extract(epoch FROM lease_expires_at - now()) AS after_start FROM consumers WHERE tenant_id = ${tenant}`,
            ([row]: Array<{ after_start: string }>) => Number(row.after_start),
          ),
        );
      });

      expect(afterStart).toBeGreaterThanOrEqual(11.4);
    });

    it('answers a renewal of rows another transaction holds at once, busy and untouched, and renews from its own clock once they are free', async () => {
      const tenant = newTenant();
      const client = new BrokerClient(app, tenant);
      const lease = await createLease(app, tenant, [60]);
      const before = await expiries(app.get(Database), tenant, lease.partitionIds);
      const lock = await lockConsumers(tenant);
      const busy = await client.extend(lease.leaseId, 120);
      await sleep(100);
      const releasedAt = await lock.release();

      expect(busy.body).toMatchObject({ success: false, renewed: 0, newExpiresAt: null });
      expect(busy.headers['leasehold-lease-status']).toBe('busy');
      expect(await expiries(app.get(Database), tenant, lease.partitionIds)).toEqual(before);
      const response = await client.extend(lease.leaseId, 120);
      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      expect(await secondsBetween(observer, response.body.newExpiresAt, releasedAt)).toBeGreaterThanOrEqual(119.9);
    });

    it('does not revive a lease that expired while its rows were held: renewed 0, expired, expiry untouched', async () => {
      const tenant = newTenant();
      const client = new BrokerClient(app, tenant);
      const lease = await createLease(app, tenant, [1]);
      const before = await expiries(app.get(Database), tenant, lease.partitionIds);
      const lock = await lockConsumers(tenant);
      await leaseExpired(tenant);
      const whileHeld = await client.extend(lease.leaseId, 60);
      await lock.release();

      const response = await client.extend(lease.leaseId, 60);
      for (const answer of [whileHeld, response]) {
        expect(answer.body).toMatchObject({ success: false, renewed: 0, newExpiresAt: null });
        expect(answer.headers['leasehold-lease-status']).toBe('expired');
      }
      expect(await expiries(app.get(Database), tenant, lease.partitionIds)).toEqual(before);
    });

    it('refuses an ack whose lease expired while the ack waited for the row lock, and leaves the cursor', async () => {
      const tenant = newTenant();
      const client = new BrokerClient(app, tenant);
      const lease = await createLease(app, tenant, [1]);
      const [message] = lease.messages;
      const lock = await lockConsumers(tenant);
      const pending = client.ack({ ...message, leaseId: lease.leaseId }).then((response) => response);
      await waitForLockWaiter(observer, ACK_ON_ITS_CURSOR);
      await leaseExpired(tenant);
      await lock.release();

      const response = await pending;
      expect(response.body).toEqual([
        expect.objectContaining({ success: false, error: 'invalid or expired lease', leaseReleased: false }),
      ]);
      const { rows } = await observer.query('SELECT committed_offset FROM consumers WHERE tenant_id = $1', [tenant]);
      expect(rows).toEqual([{ committed_offset: '0' }]);
    });
  },
);
