import { RetentionService } from '../src/retention/retention.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { PopBody } from './support/broker-client';
import { ageMessages, expireLeases, sql } from './support/db-state';
import { useTestBroker } from './support/test-broker';
import { waitFor, within } from './support/wait';

const ids = (body: PopBody) => body.messages.map((message) => message.transactionId);

/** The delivery controls Queen's clients send with configure: dlqAfterMaxRetries, retryDelay and ttl. */
describe('dlqAfterMaxRetries, retryDelay and ttl', () => {
  const broker = useTestBroker();

  /** Moves the group's retry delays and lease ends back, as if that much time had passed. */
  const pass = (seconds: number) =>
    sql(
      broker.dataSource,
      `UPDATE consumers SET retry_at = retry_at - make_interval(secs => $2),
                            lease_expires_at = lease_expires_at - make_interval(secs => $2)
        WHERE tenant_id = $1`,
      [broker.client.tenant, seconds],
    );

  describe('configure', () => {
    it('stores each one, echoes the values in force and shows them in the queue detail', async () => {
      const { client } = broker;
      const options = { dlqAfterMaxRetries: true, retryDelay: 1500, ttl: 3600 };

      const configured = await client.configure({ queue: 'controls', options }).expect(200);

      expect(configured.body.options).toEqual(options);
      const detail = await client.get('/api/v1/resources/queues/controls').expect(200);
      expect(detail.body.options).toMatchObject(options);
      expect(detail.body.retention).toMatchObject({ ttl: 3600 });
    });

    it.each([
      [{ retryDelay: -1 }, 'options.retryDelay must be an integer between 0 and 2147483647'],
      [{ ttl: 1.5 }, 'options.ttl must be an integer between 0 and 2147483647'],
      [{ dlqAfterMaxRetries: 'yes' }, 'options.dlqAfterMaxRetries must be true or false'],
    ])('refuses %j by name and changes nothing', async (options, error) => {
      const { client } = broker;
      await client.configure({ queue: 'strict', options: { retryDelay: 10 } }).expect(200);

      const refused = await client.configure({ queue: 'strict', options }).expect(400);

      expect(refused.body.error).toBe(error);
      const detail = await client.get('/api/v1/resources/queues/strict').expect(200);
      expect(detail.body.options.retryDelay).toBe(10);
    });
  });

  describe('dlqAfterMaxRetries', () => {
    const failTwice = async (queue: string) => {
      const { client } = broker;
      await client.pushMany(queue, 1);
      await client.ackAll(await client.popLeased(queue), 'failed').expect(200);
      return client.ackAll(await client.popLeased(queue), 'failed').expect(200);
    };

    it('keeps the message that used up its retries as a dead letter, deadLetterQueue off', async () => {
      const { client } = broker;
      const options = { retryLimit: 1, deadLetterQueue: false, dlqAfterMaxRetries: true };
      await client.configure({ queue: 'kept-letters', options }).expect(200);

      const last = await failTwice('kept-letters');

      expect(last.body[0]).toMatchObject({ success: true, dlq: true });
      const letters = await client.get('/api/v1/dlq', { queue: 'kept-letters' }).expect(200);
      expect(letters.body.messages.map((letter: { transactionId: string }) => letter.transactionId)).toEqual([
        'kept-letters-Default-0',
      ]);
      await client.pop('kept-letters').expect(204);
    });

    it('drops it when both it and deadLetterQueue are off', async () => {
      const { client } = broker;
      const options = { retryLimit: 1, deadLetterQueue: false, dlqAfterMaxRetries: false };
      await client.configure({ queue: 'dropped-letters', options }).expect(200);

      const last = await failTwice('dropped-letters');

      expect(last.body[0]).toMatchObject({ success: true, dlq: false });
      const letters = await client.get('/api/v1/dlq', { queue: 'dropped-letters' }).expect(200);
      expect(letters.body.messages).toEqual([]);
      await client.pop('dropped-letters').expect(204);
    });
  });

  describe('retryDelay', () => {
    it('holds a nacked batch back until the delay has passed, by the database clock', async () => {
      const { client } = broker;
      await client.configure({ queue: 'nacked', options: { retryDelay: 60_000, retryLimit: 5 } }).expect(200);
      await client.pushMany('nacked', 2);
      await client.ackAll(await client.popLeased('nacked', { batch: 2 }), 'failed').expect(200);

      await client.pop('nacked').expect(204);
      await pass(59);
      await client.pop('nacked').expect(204);
      await pass(2);

      const again = await client.popLeased('nacked', { batch: 2 });
      expect(ids(again)).toEqual(['nacked-Default-0', 'nacked-Default-1']);
    });

    it('holds back a batch handed back with status retry too', async () => {
      const { client } = broker;
      await client.configure({ queue: 'retried', options: { retryDelay: 60_000 } }).expect(200);
      await client.pushMany('retried', 1);
      await client.ackAll(await client.popLeased('retried'), 'retry').expect(200);

      await client.pop('retried').expect(204);
      await pass(61);
      expect(ids(await client.popLeased('retried'))).toEqual(['retried-Default-0']);
    });

    it('holds back a batch whose lease expired for the delay after the expiry', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'expired', options: { retryDelay: 60_000 } }).expect(200);
      await client.pushMany('expired', 1);
      const popped = await client.popLeased('expired');
      await expireLeases(dataSource, client.tenant, popped.leaseId!);

      await client.pop('expired').expect(204);
      await pass(60);
      expect(ids(await client.popLeased('expired'))).toEqual(['expired-Default-0']);
    });

    it('does not hold back other partitions, nor what follows a completed batch', async () => {
      const { client } = broker;
      await client.configure({ queue: 'others', options: { retryDelay: 60_000, retryLimit: 5 } }).expect(200);
      await client.pushMany('others', 1, 'a');
      await client.ackAll(await client.popLeased('others', {}, 'a'), 'failed').expect(200);
      await client.pushMany('others', 2, 'b');

      const b = await client.popLeased('others', { batch: 1 });
      expect(ids(b)).toEqual(['others-b-0']);
      await client.ackAll(b).expect(200);
      expect(ids(await client.popLeased('others', { batch: 1 }))).toEqual(['others-b-1']);
    });

    it('delivers to a poll parked meanwhile once the delay has passed, not before', async () => {
      const { client, app, dataSource } = broker;
      await client.configure({ queue: 'parked', options: { retryDelay: 1_500, retryLimit: 5 } }).expect(200);
      await client.pushMany('parked', 1);
      await client.ackAll(await client.popLeased('parked'), 'failed').expect(200);

      const poll = client.pop('parked', { wait: true, timeout: 20_000 }).then((response) => response);
      await waitFor(() => app.get(ParkedPolls).parkedCount(client.tenant, 'parked', '__QUEUE_MODE__') === 1, 'parked');
      const answer = await within(poll, 'the parked poll answers once the delay has passed', 15_000);

      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toEqual(['parked-Default-0']);
      // Claimed at lease_expires_at - leaseTime (60 s), by the clock that set retry_at.
      const [row] = await sql<Array<{ early: boolean }>>(
        dataSource,
        `SELECT lease_expires_at - interval '60 seconds' < retry_at AS early FROM consumers WHERE tenant_id = $1`,
        [client.tenant],
      );
      expect(row.early).toBe(false);
    });
  });

  describe('ttl', () => {
    const round = async () => {
      await sql(broker.dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
        broker.client.tenant,
      ]);
      await broker.app.get(RetentionService).runOnce([broker.client.tenant]);
    };

    it('moves a message no group consumed within it to the dead letters, and counts it', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'lived', options: { ttl: 30 } }).expect(200);
      // The queue's group exists before the push: eviction dead-letters for the groups that have not consumed.
      await client.pop('lived').expect(204);
      await client.pushMany('lived', 2);
      await ageMessages(dataSource, client.tenant, 31);
      await client.pushMany('lived', 1, undefined, 'fresh');

      await round();

      expect(ids(await client.popLeased('lived', { batch: 10 }))).toEqual(['fresh-0']);
      const letters = await client.get('/api/v1/dlq', { queue: 'lived' }).expect(200);
      expect(letters.body.messages.map((letter: { transactionId: string }) => letter.transactionId).sort()).toEqual([
        'lived-Default-0',
        'lived-Default-1',
      ]);
      const metrics = await client.get('/metrics').expect(200);
      expect(metrics.text).toMatch(/leasehold_retention_deleted_total\{[^}]*reason="evicted"[^}]*\} [1-9]/);
    });

    it('takes the shorter of ttl and maxWaitTimeSeconds', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'shorter', options: { ttl: 3600, maxWaitTimeSeconds: 30 } }).expect(200);
      await client.pop('shorter').expect(204);
      await client.pushMany('shorter', 1);
      await ageMessages(dataSource, client.tenant, 31);

      await round();

      await client.pop('shorter').expect(204);
      const letters = await client.get('/api/v1/dlq', { queue: 'shorter' }).expect(200);
      expect(letters.body.total).toBe(1);
    });
  });
});
