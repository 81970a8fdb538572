import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { RetentionService } from '../src/retention/retention.service';
import { ageMessages, sql, storedCounts, tenantSnapshot } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';
import { waitFor } from './support/wait';

/**
 * Shortening what a queue keeps deletes what nobody consumed, as clearing it does: with auth on, only the role that
 * may clear (admin) may, and nobody without it goes under the operator's floor, not even on a new queue.
 */
describe('shortening retention with auth on', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let tenant: string;
  let as: (role: string) => {
    configure: (body: object) => request.Test;
    push: (items: object[]) => request.Test;
    clear: (queue: string) => request.Test;
  };

  beforeAll(async () => {
    app = await createTestApp({
      JWT_ENABLED: 'true',
      JWT_SECRET: TEST_JWT_SECRET,
      QUEUE_MIN_RETENTION_SECONDS: '3600',
    });
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    tenant = newTenant();
    as = (role) => {
      const bearer = `Bearer ${hsToken({ tenant, role })}`;
      const http = () => request(app.getHttpServer());
      return {
        configure: (body) => http().post('/api/v1/configure').set('authorization', bearer).send(body),
        push: (items) => http().post('/api/v1/push').set('authorization', bearer).send({ items }),
        clear: (queue) => http().delete(`/api/v1/queues/${queue}/clear`).set('authorization', bearer),
      };
    };
  });

  const forbidden = (error: string) => ({ error });

  it.each([
    [
      { retentionSeconds: 1 },
      'options.retentionSeconds: deleting unconsumed messages sooner than the value in force (1209600 s) needs the admin role',
    ],
    [
      { completedRetentionSeconds: 60 },
      'options.completedRetentionSeconds: deleting consumed messages sooner than the value in force (3600 s) needs the admin role',
    ],
    [
      { maxWaitTimeSeconds: 7200 },
      'options.maxWaitTimeSeconds: evicting waiting messages sooner than the value in force (never) needs the admin role',
    ],
    [
      { dlqRetentionSeconds: 7200 },
      'options.dlqRetentionSeconds: deleting dead letters sooner than the value in force (1209600 s) needs the admin role',
    ],
  ])(
    'refuses a read-write token %j on a queue with messages, 403 naming the option, and changes nothing',
    async (options, error) => {
      await as('read-write')
        .push([{ queue: 'orders', payload: 1 }])
        .expect(201);
      // The clear route refuses this token too: shortening retention would have done what it may not.
      await as('read-write').clear('orders').expect(403, { error: 'Insufficient permissions' });
      const before = await tenantSnapshot(dataSource, tenant);

      await as('read-write').configure({ queue: 'orders', options }).expect(403, forbidden(error));

      expect(await tenantSnapshot(dataSource, tenant)).toEqual(before);
    },
  );

  it('refuses turning pending retention back on, and resetting to a shorter default with null', async () => {
    await as('admin')
      .configure({ queue: 'orders', options: { retentionEnabled: false, completedRetentionSeconds: 7200 } })
      .expect(200);

    await as('read-write')
      .configure({ queue: 'orders', options: { retentionEnabled: true } })
      .expect(
        403,
        forbidden(
          'options.retentionEnabled: deleting unconsumed messages sooner than the value in force (never) needs the admin role',
        ),
      );
    await as('read-write')
      .configure({ queue: 'orders', options: { completedRetentionSeconds: null } })
      .expect(
        403,
        forbidden(
          'options.completedRetentionSeconds: deleting consumed messages sooner than the value in force (7200 s) needs the admin role',
        ),
      );
  });

  it('lets a read-write token keep messages longer, resend what is in force, or change what deletes nothing', async () => {
    await as('read-write')
      .push([{ queue: 'orders', payload: 1 }])
      .expect(201);

    await as('read-write')
      .configure({ queue: 'orders', options: { retentionSeconds: 2_000_000, completedRetentionSeconds: 0 } })
      .expect(200);
    await as('read-write')
      .configure({ queue: 'orders', options: { retentionSeconds: 2_000_000, maxSize: 1, retryLimit: 0 } })
      .expect(200);
  });

  it('lets an admin token shorten retention, and the job then deletes what nobody consumed', async () => {
    await as('read-write')
      .push([1, 2, 3].map((n) => ({ queue: 'orders', payload: n })))
      .expect(201);

    await as('admin')
      .configure({ queue: 'orders', options: { retentionSeconds: 1 } })
      .expect(200, {
        configured: true,
        queue: 'orders',
        options: { retentionSeconds: 1 },
      });

    await ageMessages(dataSource, tenant, 2);
    await sql(dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [tenant]);
    await app.get(RetentionService).runOnce([tenant]);
    // Another file's broker may have claimed these partitions first: its round is the one to wait for then.
    await waitFor(async () => (await storedCounts(dataSource, tenant)).messages === 0, 'retention deleting them');
  });

  it('holds a read-write token to QUEUE_MIN_RETENTION_SECONDS on a new queue, which otherwise takes its options', async () => {
    await as('read-write')
      .configure({ queue: 'fresh', options: { retentionSeconds: 60 } })
      .expect(
        403,
        forbidden('options.retentionSeconds: below QUEUE_MIN_RETENTION_SECONDS (3600 s) needs the admin role'),
      );
    expect(await storedCounts(dataSource, tenant)).toMatchObject({ queues: 0 });

    // At the floor or above, a new queue takes short retention: it stores nothing yet that it could lose.
    await as('read-write')
      .configure({ queue: 'fresh', options: { retentionSeconds: 3600, completedRetentionSeconds: 3600 } })
      .expect(200);
    await as('admin')
      .configure({ queue: 'ops', options: { retentionSeconds: 60 } })
      .expect(200);
  });
});
