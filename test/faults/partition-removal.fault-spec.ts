import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { Database } from '../../src/database/database';
import { RetentionRound, RetentionService } from '../../src/retention/retention.service';
import { BrokerClient } from '../support/broker-client';
import { sql } from '../support/db-state';
import { openSession } from '../support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { waitFor } from '../support/wait';

jest.setTimeout(120_000);

const GRACE_SECONDS = 1;

/** Whether a session runs a statement containing `fragment` and is blocked on a lock; with its transaction's age. */
async function lockWaiter(observer: Client, fragment: string): Promise<{ ageSeconds: number } | undefined> {
  await observer.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await observer.query(
    `SELECT extract(epoch FROM clock_timestamp() - xact_start)::float8 AS age FROM pg_stat_activity
      WHERE wait_event_type = 'Lock' AND datname = current_database() AND position($1 in query) > 0`,
    [fragment],
  );
  return rows.length > 0 ? { ageSeconds: rows[0].age } : undefined;
}

/**
 * The retention job removes a partition that keeps nothing once its grace has passed. A push that waited for the
 * partition's lock meanwhile, longer than the grace, must not have its message removed with the partition: the
 * removal is decided under the same lock, and only for a partition no push changed since the job looked at it.
 */
(onEmbeddedDatabase ? describe.skip : describe)(
  'a push waiting on an emptied partition while retention removes it',
  () => {
    let app: NestExpressApplication;
    let dataSource: Database;
    let blocker: Client;
    let observer: Client;

    beforeAll(async () => {
      app = await createTestApp({ EMPTY_PARTITION_GRACE_SECONDS: String(GRACE_SECONDS) });
      dataSource = app.get(Database);
      blocker = await openSession();
      observer = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await observer.end();
      await app.close();
    });

    it('answers 201, and the message is stored once, delivered and acked once, whatever the grace', async () => {
      const client = new BrokerClient(app, newTenant());
      const queue = 'emptied';
      await client.pushMany(queue, 1, 'p1', 'before');
      const first = await client.popLeased(queue, {}, 'p1');
      await client.ackAll(first).expect(200);
      // What retention leaves of a consumed partition: no message, the cursor at the end, due for a look, past grace.
      await sql(dataSource, 'DELETE FROM messages WHERE tenant_id = $1', [client.tenant]);
      await sql(
        dataSource,
        `UPDATE partitions SET retention_check_at = '-infinity', last_pushed_at = now() - interval '1 hour'
        WHERE tenant_id = $1`,
        [client.tenant],
      );

      // Something else holds the partition's row: the push waits for it, beyond the grace.
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM partitions WHERE tenant_id = $1 FOR NO KEY UPDATE', [client.tenant]);
      let round: Promise<RetentionRound> | undefined;
      let roundDone = false;
      let pushed: Promise<{ status: number; body: Array<{ status: string }> }>;
      try {
        pushed = client
          .push([{ queue, partition: 'p1', payload: { kept: true }, transactionId: 'kept' }])
          .then((response) => response);
        await waitFor(
          async () => ((await lockWaiter(observer, 'AS t(queue_name, name)'))?.ageSeconds ?? 0) > GRACE_SECONDS + 0.5,
          'the push waiting for the partition longer than the grace',
        );
        // The job's schedule queues behind the push for the same row: start rounds of this tenant until it waits.
        await waitFor(async () => {
          if ((await lockWaiter(observer, 'hurried AS')) !== undefined) return true;
          if (!round || roundDone) {
            roundDone = false;
            round = app
              .get(RetentionService)
              .runOnce([client.tenant])
              .finally(() => (roundDone = true));
          }
          return false;
        }, "the retention job's schedule waiting for the partition");
      } finally {
        await blocker.query('COMMIT');
      }

      const answer = await pushed;
      await round;
      expect(answer.status).toBe(201);
      expect(answer.body[0].status).toBe('queued');

      const stored = await sql(
        dataSource,
        'SELECT m.transaction_id FROM messages m WHERE m.tenant_id = $1 ORDER BY m.seq',
        [client.tenant],
      );
      expect(stored.map((row: { transaction_id: string }) => row.transaction_id)).toEqual(['kept']);
      const delivered = await client.popLeased(queue, {}, 'p1');
      expect(delivered.messages.map((message) => message.transactionId)).toEqual(['kept']);
      const acked = await client.ackAll(delivered).expect(200);
      expect(acked.body.map((result: { success: boolean }) => result.success)).toEqual([true]);
      await client.pop(queue, {}, 'p1').expect(204);
    });
  },
);
