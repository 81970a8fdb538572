import { ParkedPolls } from '../src/wakeup/parked-polls';
import { PopBody } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { useTestBroker } from './support/test-broker';
import { waitFor, within } from './support/wait';

const ids = (body: PopBody) => body.messages.map((message) => message.transactionId);

describe('delayedProcessing and windowBuffer', () => {
  const broker = useTestBroker();

  describe('delayedProcessing', () => {
    it('holds each message back until it is that many seconds old, and hands out only those due', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'later', options: { delayedProcessing: 30 } }).expect(200);
      await client.pushMany('later', 2, undefined, 'old');
      await client.pop('later').expect(204);

      await ageMessages(dataSource, client.tenant, 31);
      await client.pushMany('later', 1, undefined, 'new');

      const due = await client.popLeased('later', { batch: 10 });
      expect(ids(due)).toEqual(['old-0', 'old-1']);
      await client.ackAll(due).expect(200);
      await client.pop('later').expect(204);
    });

    it('delivers to a poll parked before the message came due, once it does', async () => {
      const { client, app } = broker;
      await client.configure({ queue: 'soon', options: { delayedProcessing: 2 } }).expect(200);
      const poll = client.pop('soon', { wait: true, timeout: 20_000 }).then((response) => response);
      await waitFor(() => app.get(ParkedPolls).parkedCount(client.tenant, 'soon', '__QUEUE_MODE__') === 1, 'parked');
      const pushedAt = Date.now();
      await client.pushMany('soon', 1);

      const answer = await within(poll, 'the parked poll answers once the message is due', 15_000);

      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toEqual(['soon-Default-0']);
      // Due two seconds after its push by the database clock; the push returned after the row was written.
      expect(Date.now() - pushedAt).toBeGreaterThanOrEqual(1_500);
    });

    it('redelivers a nacked batch at once: the delay is counted from the push, not from the nack', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'again', options: { delayedProcessing: 30, retryLimit: 5 } }).expect(200);
      await client.pushMany('again', 1);
      await ageMessages(dataSource, client.tenant, 31);
      await client.ackAll(await client.popLeased('again'), 'failed').expect(200);

      expect(ids(await client.popLeased('again'))).toEqual(['again-Default-0']);
    });
  });

  describe('windowBuffer', () => {
    it('hands a partition out only once its newest message is that old, then its whole burst at once', async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'burst', options: { windowBuffer: 30 } }).expect(200);
      await client.pushMany('burst', 3, 'a');
      await client.pushMany('burst', 1, 'b');
      await client.pop('burst').expect(204);

      await ageMessages(dataSource, client.tenant, 31);
      await client.pushMany('burst', 1, 'b', 'b-late');

      const quiet = await client.popLeased('burst', { batch: 10, partitions: 10 });
      expect(ids(quiet)).toEqual(['burst-a-0', 'burst-a-1', 'burst-a-2']);
      // b's newest message is fresh: the whole partition waits, its older message too.
      await client.pop('burst', { batch: 10, partitions: 10 }).expect(204);
      await sql(
        dataSource,
        `UPDATE messages SET created_at = created_at - interval '31 seconds' WHERE tenant_id = $1`,
        [client.tenant],
      );
      expect(ids(await client.popLeased('burst', { batch: 10 }))).toEqual(['burst-b-0', 'b-late-0']);
    });

    it('delivers to a parked poll once the window has passed', async () => {
      const { client, app } = broker;
      await client.configure({ queue: 'window', options: { windowBuffer: 1 } }).expect(200);
      const poll = client.pop('window', { wait: true, timeout: 20_000, batch: 10 }).then((response) => response);
      await waitFor(() => app.get(ParkedPolls).parkedCount(client.tenant, 'window', '__QUEUE_MODE__') === 1, 'parked');
      await client.pushMany('window', 3);

      const answer = await within(poll, 'the parked poll answers once the window has passed', 15_000);

      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toHaveLength(3);
    });
  });
});
