import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { uuidv7 } from '../src/common/uuid';
import { MetricsService } from '../src/metrics/metrics.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient, PopBody, PopMessage } from './support/broker-client';
import { cursors, expireLeases, sql, storedCounts, tenantSnapshot } from './support/db-state';
import { lockTenantRows, openSession } from './support/pg-session';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { expectPayloadsAsSent, sentItems } from './support/sent-payloads';
import { useTestBroker } from './support/test-broker';
import { waitFor, waitForLockWaiter, within } from './support/wait';

const RESULT_KEYS = ['transactionId', 'success', 'results'];
const FAILURE_KEYS = ['transactionId', 'success', 'reason', 'error', 'results'];

interface Answer {
  status: number;
  body: any;
}

const transact = async (client: BrokerClient, body: unknown): Promise<Answer> => {
  const response = await client.post('/api/v1/transaction', body);
  return { status: response.status, body: response.body };
};

/** The ack operation of a popped message, with its lease and epoch unless told otherwise. */
const ackOp = (pop: PopBody, message: PopMessage, extra: Record<string, unknown> = {}) => ({
  type: 'ack',
  transactionId: message.transactionId,
  partitionId: message.partitionId,
  consumerGroup: pop.consumerGroup,
  leaseId: pop.leaseId,
  leaseEpoch: message.leaseEpoch,
  ...extra,
});

const pushOp = (queue: string, ...ids: string[]) => ({
  type: 'push',
  items: ids.map((transactionId) => ({ queue, transactionId, payload: { from: transactionId } })),
});

describe('POST /api/v1/transaction', () => {
  const broker = useTestBroker({ MESSAGE_MAX_BYTES: '65536', BODY_LIMIT: '1mb' });

  /** One message in `in`, popped by consumer group `stage` under a lease. */
  async function input(count = 1, query: Record<string, string | number> = {}): Promise<PopBody> {
    await broker.client.pushMany('in', count);
    return broker.client.popLeased('in', { consumerGroup: 'stage', batch: 10, ...query });
  }

  async function popped(queue: string, query: Record<string, string | number> = {}): Promise<PopMessage[]> {
    const response = await broker.client.pop(queue, { batch: 100, ...query });
    return response.status === 200 ? (response.body as PopBody).messages : [];
  }

  describe('when every operation applies', () => {
    it('commits the ack and the push together: the input is consumed, its lease released, the output poppable at once', async () => {
      const pop = await input();

      const { status, body } = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'out-1')],
        requiredLeases: [pop.leaseId],
      });

      expect(status).toBe(200);
      expect(Object.keys(body)).toEqual(RESULT_KEYS);
      expect(body.success).toBe(true);
      expect(body.transactionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
      expect(body.results).toEqual([
        {
          index: 0,
          type: 'ack',
          transactionId: pop.messages[0].transactionId,
          success: true,
          error: null,
          leaseReleased: true,
          dlq: false,
        },
        {
          index: 1,
          type: 'push',
          success: true,
          items: [
            { index: 0, message_id: expect.any(String), transaction_id: 'out-1', queueName: 'out', status: 'queued' },
          ],
        },
      ]);
      expect((await popped('out')).map((message) => message.data)).toEqual([{ from: 'out-1' }]);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 0 });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([
        { consumerGroup: 'stage', committedOffset: 1, leaseId: null },
      ]);
    });

    it('stores pushed payloads as they were written, minified, and a pop answers them byte for byte', async () => {
      const pop = await input();
      const ack = JSON.stringify(ackOp(pop, pop.messages[0]));

      const response = await broker.client.postText(
        '/api/v1/transaction',
        `{"operations": [${ack}, {"type": "push", "items": ${sentItems('out', 'p')}}], "requiredLeases": ["${pop.leaseId}"]}`,
      );

      expect(response.status).toBe(200);
      expect(response.body.success).toBe(true);
      const out = await broker.client.pop('out', { batch: 100 });
      expect(out.status).toBe(200);
      expectPayloadsAsSent(out.text, 'p');
    });

    it('checks an ack without a leaseId against the required lease holding its partition', async () => {
      const pop = await input(2);
      const [first, second] = pop.messages.map((message) => ({
        type: 'ack',
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        consumerGroup: 'stage',
      }));

      const held = await transact(broker.client, { operations: [first], requiredLeases: [pop.leaseId] });
      expect(held.body).toMatchObject({ success: true, results: [{ success: true, leaseReleased: false }] });

      await expireLeases(broker.dataSource, broker.client.tenant, pop.leaseId!);
      const lapsed = await transact(broker.client, { operations: [second], requiredLeases: [pop.leaseId] });
      expect(lapsed.body).toMatchObject({
        success: false,
        reason: 'lease_lost',
        error: 'operations[0]: invalid or expired lease',
      });
    });

    it('runs operations in request order: pushes before and after acks, several queues and partitions', async () => {
      const pop = await input(2);

      const { body } = await transact(broker.client, {
        operations: [
          pushOp('a', 'a-1'),
          ackOp(pop, pop.messages[0]),
          { type: 'push', items: [{ queue: 'b', partition: 'p7', payload: 1 }] },
          ackOp(pop, pop.messages[1]),
          pushOp('a', 'a-2', 'a-3'),
        ],
        requiredLeases: [pop.leaseId],
      });

      expect(body.success).toBe(true);
      expect(body.results.map((result: { index: number; type: string }) => `${result.index}:${result.type}`)).toEqual([
        '0:push',
        '1:ack',
        '2:push',
        '3:ack',
        '4:push',
      ]);
      expect(body.results[4].items.map((item: { index: number }) => item.index)).toEqual([0, 1]);
      expect((await popped('a')).map((message) => message.transactionId)).toEqual(['a-1', 'a-2', 'a-3']);
      expect((await popped('b', {}))[0]).toMatchObject({ partition: 'p7', data: 1 });
    });

    it('reports a push item already stored as duplicate, stores it once, and still commits', async () => {
      await broker.client.pushMany('out', 1, undefined, 'out');
      const pop = await input();

      const { body } = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'out-0', 'out-new', 'out-new')],
        requiredLeases: [pop.leaseId],
      });

      expect(body.success).toBe(true);
      expect(body.results[1].items.map((item: { status: string }) => item.status)).toEqual([
        'duplicate',
        'queued',
        'duplicate',
      ]);
      expect((await popped('out')).map((message) => message.transactionId)).toEqual(['out-0', 'out-new']);
    });

    it('counts a nack in a transaction against the retry budget, as /ack does', async () => {
      await broker.client.configure({ queue: 'in', options: { retryLimit: 1, deadLetterQueue: true } });
      let pop = await input();

      const first = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0], { status: 'failed', error: 'boom' })],
      });
      expect(first.body.results[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });

      pop = await broker.client.popLeased('in', { consumerGroup: 'stage' });
      const second = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0], { status: 'failed', error: 'boom again' })],
      });
      expect(second.body.results[0]).toMatchObject({ success: true, dlq: true });
      expect((await broker.client.pop('in', { consumerGroup: 'stage' })).status).toBe(204);
    });
  });

  describe('when anything does not apply, nothing does', () => {
    it('rolls back the two operations before a failing third, and changes nothing stored', async () => {
      const pop = await input();
      await broker.client.pushMany('out', 1, undefined, 'kept');
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const { status, body } = await transact(broker.client, {
        operations: [
          pushOp('out', 'never-1'),
          ackOp(pop, pop.messages[0]),
          { type: 'ack', transactionId: 'no-such-message', partitionId: pop.messages[0].partitionId },
        ],
        requiredLeases: [pop.leaseId],
      });

      expect(status).toBe(200);
      expect(Object.keys(body)).toEqual(FAILURE_KEYS);
      expect(body).toEqual({
        transactionId: expect.any(String),
        success: false,
        reason: 'ack_rejected',
        error: 'operations[2]: message not found in this partition',
        results: [],
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });
    });

    it('refuses a required lease that expired a moment before commit, and pushes nothing', async () => {
      const pop = await input();
      await expireLeases(broker.dataSource, broker.client.tenant, pop.leaseId!);
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const { body } = await transact(broker.client, {
        operations: [pushOp('out', 'late-1')],
        requiredLeases: [pop.leaseId],
      });

      expect(body).toMatchObject({
        success: false,
        reason: 'lease_lost',
        error: 'requiredLeases[0]: invalid or expired lease',
        results: [],
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    });

    // The check at COMMIT: the lease was live when the transaction locked it and ran out while it waited.
    (onEmbeddedDatabase ? it.skip : it)(
      'refuses a required lease that ran out between the lock and the commit, in the COMMIT round trip, and pushes nothing',
      async () => {
        const { client, dataSource } = broker;
        const pop = await input(1, { leaseSeconds: 1 });
        await client.pushMany('out', 1, undefined, 'first');
        const before = await tenantSnapshot(dataSource, client.tenant);
        const blocker = await openSession();
        const observer = await openSession();
        try {
          await lockTenantRows(blocker, 'partitions', client.tenant);
          const pending = transact(client, {
            operations: [pushOp('out', 'late-2')],
            requiredLeases: [pop.leaseId],
          });
          await waitForLockWaiter(observer, 'AS t(queue_name, name)');
          await waitFor(async () => {
            const { rows } = await observer.query(
              'SELECT bool_and(lease_expires_at < clock_timestamp()) AS over FROM consumers WHERE lease_id = $1',
              [pop.leaseId],
            );
            return rows[0].over === true;
          }, 'the lease runs out by the database clock');
          await blocker.query('ROLLBACK');

          const { body } = await pending;
          expect(body).toMatchObject({
            success: false,
            reason: 'lease_lost',
            error: 'requiredLeases[0]: invalid or expired lease',
            results: [],
          });
          expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
        } finally {
          await blocker.end();
          await observer.end();
        }
      },
    );

    it('names a bogus required lease by its index, never its value (1 MB here), and pushes nothing', async () => {
      const pop = await input();
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const { status, body } = await transact(broker.client, {
        operations: [pushOp('out', 'bogus-1')],
        requiredLeases: [pop.leaseId, 'x'.repeat(1_000_000)],
      });

      expect(status).toBe(200);
      expect(body).toEqual({
        transactionId: expect.any(String),
        success: false,
        reason: 'lease_lost',
        error: 'requiredLeases[1]: invalid or expired lease',
        results: [],
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    });

    it("refuses a stale epoch after the batch was claimed again, leaving the new holder's lease and cursor alone", async () => {
      const stale = await input();
      await expireLeases(broker.dataSource, broker.client.tenant, stale.leaseId!);
      const fresh = await broker.client.popLeased('in', { consumerGroup: 'stage' });
      expect(fresh.messages[0].leaseEpoch).toBe(stale.messages[0].leaseEpoch + 1);

      // The stale worker names the new lease (it may have learned it), but its epoch gives it away.
      const { body } = await transact(broker.client, {
        operations: [ackOp(stale, stale.messages[0], { leaseId: fresh.leaseId }), pushOp('out', 'stale-output')],
        requiredLeases: [fresh.leaseId],
      });

      expect(body).toMatchObject({
        success: false,
        reason: 'lease_lost',
        error: 'operations[0]: invalid or expired lease',
      });
      expect(await popped('out')).toEqual([]);
      expect((await broker.client.extend(fresh.leaseId!)).body).toMatchObject({ renewed: 1 });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([
        { committedOffset: 0, leaseId: fresh.leaseId, leaseLive: true },
      ]);
    });

    it("answers another tenant's partition and lease exactly as unknown ones, and leaks and changes nothing of theirs", async () => {
      const owner = broker.client;
      const pop = await input();
      const ownerBefore = await tenantSnapshot(broker.dataSource, owner.tenant);
      const intruder = new BrokerClient(broker.app, newTenant());

      const foreign = await transact(intruder, { operations: [pushOp('out', 'x'), ackOp(pop, pop.messages[0])] });
      const unknown = await transact(intruder, {
        operations: [pushOp('out', 'x'), ackOp(pop, pop.messages[0], { partitionId: uuidv7(), leaseId: uuidv7() })],
      });
      const foreignLease = await transact(intruder, {
        operations: [pushOp('out', 'y')],
        requiredLeases: [pop.leaseId],
      });
      const unknownLease = await transact(intruder, { operations: [pushOp('out', 'y')], requiredLeases: [uuidv7()] });

      const shape = ({ body }: Answer) => ({ ...body, transactionId: undefined, error: body.error.split(':')[0] });
      expect(shape(foreign)).toEqual(shape(unknown));
      expect(foreign.body).toMatchObject({
        success: false,
        reason: 'ack_rejected',
        error: 'operations[1]: partition not found',
      });
      expect(shape(foreignLease)).toEqual(shape(unknownLease));
      expect(foreignLease.body.reason).toBe('lease_lost');
      expect(await tenantSnapshot(broker.dataSource, owner.tenant)).toEqual(ownerBefore);
      expect((await tenantSnapshot(broker.dataSource, intruder.tenant)).messages).toEqual([]);
    });

    it('answers a replay of a committed transaction duplicate, and applies nothing twice', async () => {
      const pop = await input();
      const body = { operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'once')], requiredLeases: [pop.leaseId] };
      expect((await transact(broker.client, body)).body.success).toBe(true);
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const replay = await transact(broker.client, body);

      expect(replay.body).toMatchObject({
        success: false,
        reason: 'duplicate',
        error: 'operations[0]: already applied: every push item is a duplicate and every ack already acknowledged',
        results: [],
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    });

    it('does not call a transaction whose pushes are new a replay: an ack of a consumed message is ack_rejected', async () => {
      const pop = await input();
      await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0], { leaseId: undefined, leaseEpoch: undefined })],
      });

      const { body } = await transact(broker.client, {
        operations: [
          pushOp('out', 'new-output'),
          ackOp(pop, pop.messages[0], { leaseId: undefined, leaseEpoch: undefined }),
        ],
      });

      expect(body).toMatchObject({
        success: false,
        reason: 'ack_rejected',
        error: 'operations[1]: message already acknowledged',
      });
      expect(await popped('out')).toEqual([]);
    });

    it('lets exactly one of several concurrent transactions acking the same message commit', async () => {
      const pop = await input();

      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, n) =>
          transact(broker.client, {
            operations: [ackOp(pop, pop.messages[0]), pushOp('out', `output-of-${n}`)],
            requiredLeases: [pop.leaseId],
          }),
        ),
      );

      const committed = answers.filter((answer) => answer.body.success);
      expect(committed).toHaveLength(1);
      for (const answer of answers.filter((candidate) => !candidate.body.success)) {
        expect(answer.status).toBe(200);
        expect(['lease_lost', 'ack_rejected']).toContain(answer.body.reason);
      }
      expect(await popped('out')).toHaveLength(1);
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([{ committedOffset: 1 }]);
    });

    it('rolls back on a queue at its maxSize, naming the item', async () => {
      await broker.client.configure({ queue: 'small', options: { maxSize: 1 } });
      await broker.client.pushMany('small', 1);
      const pop = await input();

      const { body } = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0]), pushOp('small', 'overflow')],
        requiredLeases: [pop.leaseId],
      });

      expect(body).toMatchObject({
        success: false,
        reason: 'bad_request',
        error: 'operations[1].items[0]: queue is full',
      });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([{ committedOffset: 0 }]);
    });

    it('answers db_error when the database refuses a statement, applies nothing, and goes on serving', async () => {
      const pop = await input();
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);
      const trigger = `refuse_${broker.client.tenant.replace(/-/g, '')}`;
      await sql(
        broker.dataSource,
        `CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'refused by a test trigger'; END $$`,
      );
      await sql(
        broker.dataSource,
        `CREATE TRIGGER ${trigger} BEFORE INSERT ON messages FOR EACH ROW
           WHEN (NEW.tenant_id = '${broker.client.tenant}') EXECUTE FUNCTION ${trigger}()`,
      );
      let answer: Answer;
      try {
        answer = await transact(broker.client, {
          operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'refused')],
          requiredLeases: [pop.leaseId],
        });
      } finally {
        await sql(broker.dataSource, `DROP TRIGGER ${trigger} ON messages`);
        await sql(broker.dataSource, `DROP FUNCTION ${trigger}()`);
      }

      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ success: false, reason: 'db_error', results: [] });
      // The database's own text (which can quote what was sent) goes to the log, not to the caller.
      expect(answer.body.error).toBe('the database rolled the transaction back; nothing applied');
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
      const retried = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'refused')],
        requiredLeases: [pop.leaseId],
      });
      expect(retried.body.success).toBe(true);
    });
  });

  describe('request order, kept though pushes and acks each run as one batch', () => {
    const leaseless = { leaseId: undefined, leaseEpoch: undefined };

    it('runs a long alternation of pushes to many partitions and acks, answering each operation in its place', async () => {
      const pop = await input(40, { batch: 40 });
      const operations = pop.messages.flatMap((message, n) => [
        { type: 'push', items: [{ queue: 'out', partition: `p${n}`, transactionId: `o-${n}`, payload: n }] },
        ackOp(pop, message),
      ]);

      const { body } = await transact(broker.client, { operations, requiredLeases: [pop.leaseId] });

      expect(body.success).toBe(true);
      expect(body.results).toHaveLength(80);
      body.results.forEach((result: { index: number; type: string }, index: number) =>
        expect([result.index, result.type]).toEqual([index, index % 2 === 0 ? 'push' : 'ack']),
      );
      expect(body.results[2].items).toEqual([
        { index: 0, message_id: expect.any(String), transaction_id: 'o-1', queueName: 'out', status: 'queued' },
      ]);
      expect(body.results.filter((result: { leaseReleased?: boolean }) => result.leaseReleased)).toEqual([
        expect.objectContaining({ index: 79, transactionId: pop.messages[39].transactionId }),
      ]);
      expect((await storedCounts(broker.dataSource, broker.client.tenant)).messages).toBe(80);
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([
        { committedOffset: 40, leaseId: null },
      ]);
    });

    it('names the first operation that fails in a long alternation, and stores nothing of it', async () => {
      const pop = await input(20, { batch: 20 });
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);
      const operations = pop.messages.flatMap((message, n) => [
        { type: 'push', items: [{ queue: 'out', partition: `p${n}`, payload: n }] },
        n === 6 ? ackOp(pop, message, { transactionId: 'no-such-message' }) : ackOp(pop, message),
      ]);
      // A lost lease is reported before any other failure, wherever it stands.
      operations[31] = ackOp(pop, pop.messages[15], { leaseEpoch: pop.messages[15].leaseEpoch + 1 });

      const { body } = await transact(broker.client, { operations, requiredLeases: [pop.leaseId] });

      expect(body).toMatchObject({
        success: false,
        reason: 'lease_lost',
        error: 'operations[31]: invalid or expired lease',
      });
      operations[31] = ackOp(pop, pop.messages[15]);
      const second = await transact(broker.client, { operations, requiredLeases: [pop.leaseId] });
      expect(second.body).toEqual({
        transactionId: expect.any(String),
        success: false,
        reason: 'ack_rejected',
        error: 'operations[13]: message not found in this partition',
        results: [],
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });
    });

    it('refuses an ack of a message the same transaction pushes, as it would be refused one operation at a time', async () => {
      const pop = await input();
      const { partitionId } = pop.messages[0];
      const pushFresh = { type: 'push', items: [{ queue: 'in', transactionId: 'fresh', payload: 'fresh' }] };
      const ackFresh = (extra: Record<string, unknown>) => ({
        type: 'ack',
        transactionId: 'fresh',
        partitionId,
        consumerGroup: 'stage',
        ...extra,
      });
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const required = [pop.leaseId];
      const cases = [
        [
          [pushFresh, ackFresh({ leaseId: pop.leaseId })],
          required,
          'operations[1]: message is not in the batch of this lease',
        ],
        [[pushFresh, ackFresh({})], [], 'operations[1]: message has not been delivered to this consumer group'],
        [
          [ackFresh({ leaseId: pop.leaseId }), pushFresh],
          required,
          'operations[0]: message not found in this partition',
        ],
        [
          [ackOp(pop, pop.messages[0]), pushFresh, pushFresh, ackFresh({})],
          required,
          'operations[3]: message has not been delivered to this consumer group',
        ],
      ] as const;
      for (const [operations, requiredLeases, error] of cases) {
        const { body } = await transact(broker.client, { operations, requiredLeases });
        expect(body).toMatchObject({ success: false, reason: 'ack_rejected', error });
      }

      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    });

    it('stores a transactionId pushed twice once, answering the later one duplicate with the first one’s id', async () => {
      const pop = await input(2);

      const { body } = await transact(broker.client, {
        operations: [
          pushOp('out', 'x'),
          ackOp(pop, pop.messages[0]),
          {
            type: 'push',
            items: [
              { queue: 'out', transactionId: 'x', payload: 'again' },
              { queue: 'out', transactionId: 'y', payload: 'y' },
            ],
          },
          ackOp(pop, pop.messages[1]),
          pushOp('out', 'y'),
        ],
        requiredLeases: [pop.leaseId],
      });

      expect(body.success).toBe(true);
      const [x] = body.results[0].items;
      const [again, y] = body.results[2].items;
      expect(x).toMatchObject({ index: 0, status: 'queued' });
      expect(again).toEqual({ ...x, status: 'duplicate' });
      expect(y).toMatchObject({ index: 1, status: 'queued' });
      expect(body.results[4].items).toEqual([{ ...y, index: 0, status: 'duplicate' }]);
      expect((await popped('out')).map((message) => [message.transactionId, message.data])).toEqual([
        ['x', { from: 'x' }],
        ['y', 'y'],
      ]);
    });

    it('refuses an ack whose lease an earlier ack of the same transaction released, naming it', async () => {
      const pop = await input(2);
      const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

      const { body } = await transact(broker.client, {
        operations: [
          ackOp(pop, pop.messages[0], { status: 'failed' }),
          pushOp('out', 'z'),
          ackOp(pop, pop.messages[1]),
        ],
        requiredLeases: [pop.leaseId],
      });

      expect(body).toMatchObject({
        success: false,
        reason: 'lease_lost',
        error: 'operations[2]: invalid or expired lease',
      });
      expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
      expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });
    });

    it('counts a transaction’s failures in one partition as one retry, wherever pushes stand between them, then dead-letters', async () => {
      await broker.client.configure({ queue: 'in', options: { retryLimit: 2, deadLetterQueue: true } });
      let pop = await input(2);

      const first = await transact(broker.client, {
        operations: [
          ackOp(pop, pop.messages[0], { status: 'failed', ...leaseless }),
          pushOp('out', 'a'),
          ackOp(pop, pop.messages[1], { status: 'failed', ...leaseless }),
        ],
      });
      expect(first.body.results.map((result: { dlq?: boolean }) => result.dlq)).toEqual([false, undefined, false]);
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([
        { committedOffset: 0, retryCount: 1, leaseId: null },
      ]);

      pop = await broker.client.popLeased('in', { consumerGroup: 'stage' });
      const second = await transact(broker.client, {
        operations: [pushOp('out', 'b'), ackOp(pop, pop.messages[0], { status: 'failed' })],
      });
      expect(second.body.results[1]).toMatchObject({ success: true, dlq: false });

      pop = await broker.client.popLeased('in', { consumerGroup: 'stage' });
      const third = await transact(broker.client, {
        operations: [ackOp(pop, pop.messages[0], { status: 'failed', error: 'gave up' }), pushOp('out', 'c')],
      });
      expect(third.body.results[0]).toMatchObject({ success: true, dlq: true });
      expect(await cursors(broker.dataSource, broker.client.tenant, 'in')).toMatchObject([
        { committedOffset: 1, retryCount: 0 },
      ]);
      expect((await popped('out')).map((message) => message.transactionId)).toEqual(['a', 'b', 'c']);
    });

    it('holds a queue’s maxSize against what the transaction leaves in it: its acks free room wherever they stand', async () => {
      await broker.client.configure({ queue: 'loop', options: { maxSize: 1 } });
      await broker.client.pushMany('loop', 1);
      const pop = await broker.client.popLeased('loop');

      const { body } = await transact(broker.client, {
        operations: [pushOp('loop', 'next'), ackOp(pop, pop.messages[0])],
        requiredLeases: [pop.leaseId],
      });
      expect(body).toMatchObject({ success: true, results: [{ items: [{ status: 'queued' }] }, { success: true }] });

      const next = await broker.client.popLeased('loop');
      expect(next.messages.map((message) => message.transactionId)).toEqual(['next']);
      const full = await transact(broker.client, {
        operations: [pushOp('loop', 'a', 'b'), ackOp(next, next.messages[0])],
        requiredLeases: [next.leaseId],
      });
      expect(full.body).toMatchObject({
        success: false,
        reason: 'bad_request',
        error: 'operations[0].items[1]: queue is full',
      });
    });
  });

  describe('bad requests', () => {
    it.each([
      [undefined, 'request body must be a JSON object'],
      [{}, 'operations must be an array'],
      [{ operations: 'push' }, 'operations must be an array'],
      [{ operations: [] }, 'operations must not be empty'],
      [{ operations: [pushOp('q', 'a')], requiredLeases: 'x' }, 'requiredLeases must be an array'],
      [{ operations: [pushOp('q', 'a')], requiredLeases: [7] }, 'requiredLeases[0] must be a string'],
      [
        { operations: [{ type: 'push', items: new Array(10_001).fill({ queue: 'q', payload: 1 }) }] },
        'operations may hold at most 10000 push items in all',
      ],
      [
        { operations: new Array(3).fill({ type: 'push', items: new Array(4_000).fill({ queue: 'q', payload: 1 }) }) },
        'operations may hold at most 10000 push items in all',
      ],
      [
        { operations: new Array(20_001).fill({ type: 'ack' }) },
        'operations may hold at most 20000 operations (TRANSACTION_MAX_OPERATIONS), each ack and each push item counting one',
      ],
    ])('answers 400 to %#, and stores nothing', async (body, error) => {
      const response = await broker.client.post('/api/v1/transaction', body);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error });
      expect((await tenantSnapshot(broker.dataSource, broker.client.tenant)).messages).toEqual([]);
    });

    it.each([
      [[pushOp('q', 'a'), { type: 'nack' }], 'bad_request', 'operations[1].type must be push or ack'],
      [[pushOp('q', 'a'), 'ack'], 'bad_request', 'operations[1] must be a JSON object'],
      [
        [{ type: 'push', items: [{ queue: 'q' }] }],
        'bad_request',
        'operations[0].items[0].payload is required (null is allowed)',
      ],
      [
        [{ type: 'ack', transactionId: 't', partitionId: 'p' }],
        'bad_request',
        'operations[0].partitionId must be a UUID',
      ],
      [
        [{ type: 'push', items: [{ queue: 'q', payload: 'x'.repeat(70_000) }] }],
        'payload_too_large',
        'operations[0].items[0].payload is larger than 65536 bytes (70002)',
      ],
    ])(
      'rolls back a malformed operation (%#) as %s, before touching the database',
      async (operations, reason, error) => {
        const { status, body } = await transact(broker.client, { operations });

        expect(status).toBe(200);
        expect(body).toEqual({ transactionId: expect.any(String), success: false, reason, error, results: [] });
        expect((await tenantSnapshot(broker.dataSource, broker.client.tenant)).queues).toEqual([]);
      },
    );

    it('answers 413 to a body above BODY_LIMIT (1 MiB here)', async () => {
      const items = Array.from({ length: 40 }, () => ({ queue: 'q', payload: 'x'.repeat(60_000) }));
      const response = await broker.client.post('/api/v1/transaction', { operations: [{ type: 'push', items }] });

      expect(response.status).toBe(413);
      expect((await tenantSnapshot(broker.dataSource, broker.client.tenant)).messages).toEqual([]);
    });
  });

  describe('effects', () => {
    it('wakes a parked poll once committed, and a rolled-back push wakes and counts nothing', async () => {
      const polls = broker.app.get(ParkedPolls);
      const metrics = broker.app.get(MetricsService);
      let pushed: jest.SpyInstance | undefined;
      const pushedOut = async () =>
        (await metrics.pushedMessages.get()).values.find((value) => value.labels.queue === 'woken')?.value ?? 0;
      try {
        const pop = await input();
        const parked = broker.client.pop('woken', { wait: true, timeout: 60_000 }).then((response) => response);
        await waitFor(() => polls.parkedCount(broker.client.tenant, 'woken', '__QUEUE_MODE__') === 1, 'the poll parks');
        const countedBefore = await pushedOut();
        pushed = jest.spyOn(polls, 'pushed');
        const wokenFor = () =>
          pushed!.mock.calls.filter(([tenant, work]) => tenant === broker.client.tenant && work.has('woken'));

        const refused = await transact(broker.client, {
          operations: [pushOp('woken', 'rolled-back'), { type: 'ack', transactionId: 'nope', partitionId: uuidv7() }],
        });
        expect(refused.body.success).toBe(false);
        expect(wokenFor()).toEqual([]);
        expect(polls.parkedCount(broker.client.tenant, 'woken', '__QUEUE_MODE__')).toBe(1);
        expect(await pushedOut()).toBe(countedBefore);

        const committed = await transact(broker.client, {
          operations: [ackOp(pop, pop.messages[0]), pushOp('woken', 'committed')],
          requiredLeases: [pop.leaseId],
        });
        expect(committed.body.success).toBe(true);
        const answer = await within(parked, 'the parked poll answers', 15_000);
        expect(answer.status).toBe(200);
        expect(answer.body.messages.map((message: PopMessage) => message.transactionId)).toEqual(['committed']);
        expect(wokenFor()).toHaveLength(1);
        expect(await pushedOut()).toBe(countedBefore + 1);
      } finally {
        pushed?.mockRestore();
      }
    });

    it('counts transactions by outcome', async () => {
      const metrics = broker.app.get(MetricsService);
      const count = async (outcome: string) =>
        (await metrics.transactions.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;
      const [committed, lost] = [await count('committed'), await count('lease_lost')];

      await transact(broker.client, { operations: [pushOp('q', 'a')] });
      await transact(broker.client, { operations: [pushOp('q', 'b')], requiredLeases: [uuidv7()] });

      expect(await count('committed')).toBe(committed + 1);
      expect(await count('lease_lost')).toBe(lost + 1);
    });
  });
});

describe('POST /api/v1/transaction, rate-limited in the write class', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp({ RATE_LIMIT_PRODUCE: '3', RATE_LIMIT_RENEW: '0' });
  });

  afterAll(() => app.close());

  it('answers 429 past RATE_LIMIT_PRODUCE per second, a budget shared with pushes', async () => {
    const client = new BrokerClient(app, newTenant());

    const answers = await Promise.all([
      ...Array.from({ length: 3 }, (_, n) => client.push([{ queue: 'q', payload: n }]).then((r) => r)),
      ...Array.from({ length: 3 }, (_, n) =>
        client.post('/api/v1/transaction', { operations: [pushOp('q', `t${n}`)] }).then((r) => r),
      ),
    ]);

    const refused = answers.filter((answer) => answer.status === 429);
    expect(answers.filter((answer) => answer.status === 200 || answer.status === 201)).toHaveLength(3);
    expect(refused).toHaveLength(3);
    for (const answer of refused) expect(answer.body).toEqual({ error: 'too many requests' });
  });
});

describe('POST /api/v1/transaction, capped by TRANSACTION_MAX_OPERATIONS', () => {
  const broker = useTestBroker({ TRANSACTION_MAX_OPERATIONS: '10' });
  const CAP_ERROR =
    'operations may hold at most 10 operations (TRANSACTION_MAX_OPERATIONS), each ack and each push item counting one';

  const items = (count: number, prefix: string) =>
    Array.from({ length: count }, (_, n) => ({ queue: 'out', transactionId: `${prefix}-${n}`, payload: n }));

  async function leased(): Promise<PopBody> {
    await broker.client.pushMany('in', 4);
    return broker.client.popLeased('in', { consumerGroup: 'stage' });
  }

  it('commits a transaction of exactly the cap: four acks and six push items', async () => {
    const pop = await leased();

    const { status, body } = await transact(broker.client, {
      operations: [
        ...pop.messages.slice(0, 2).map((message) => ackOp(pop, message)),
        { type: 'push', items: items(6, 'at-cap') },
        ...pop.messages.slice(2).map((message) => ackOp(pop, message)),
      ],
      requiredLeases: [pop.leaseId],
    });

    expect(status).toBe(200);
    expect(body.success).toBe(true);
    expect((await storedCounts(broker.dataSource, broker.client.tenant)).messages).toBe(10);
  });

  it.each([
    [
      'four acks and seven push items',
      (pop: PopBody) => [...pop.messages.map((m) => ackOp(pop, m)), { type: 'push', items: items(7, 'past') }],
    ],
    ['eleven acks', (pop: PopBody) => Array.from({ length: 11 }, (_, n) => ackOp(pop, pop.messages[n % 4]))],
    ['eleven pushes without items', () => Array.from({ length: 11 }, () => ({ type: 'push', items: [] }))],
    [
      'two pushes of six and five items',
      () => [
        { type: 'push', items: items(6, 'a') },
        { type: 'push', items: items(5, 'b') },
      ],
    ],
    [
      'ten acks and an operation of no known type',
      (pop: PopBody) => [...Array.from({ length: 10 }, (_, n) => ackOp(pop, pop.messages[n % 4])), { type: 'nack' }],
    ],
  ])('refuses one past the cap (%s) with 400 before any database work, and stores nothing', async (_shape, build) => {
    const pop = await leased();
    const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);

    const response = await broker.client.post('/api/v1/transaction', {
      operations: build(pop),
      requiredLeases: [pop.leaseId],
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({ error: CAP_ERROR });
    expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    expect((await broker.client.extend(pop.leaseId!)).body).toMatchObject({ renewed: 1 });
  });
});

describe("POST /api/v1/transaction, its acks counted against the tenant's RATE_LIMIT_CONSUME", () => {
  const broker = useTestBroker({ RATE_LIMIT_CONSUME: '3', RATE_LIMIT_PRODUCE: '0' });
  let clock: jest.SpyInstance | undefined;

  /** Everything that follows counts in one window of the limiter: its clock stands still. */
  function freezeLimiterClock(): void {
    const at = Date.now() + 60_000;
    clock = jest.spyOn(Date, 'now').mockReturnValue(at);
  }

  afterEach(() => clock?.mockRestore());

  const bogusAck = (partitionId: string) => ({ transactionId: 'no-such-message', partitionId });

  it('refuses a transaction whose acks need more than is left of the second (one per 10000 acks), storing nothing and counting nothing', async () => {
    await broker.client.pushMany('in', 1);
    const pop = await broker.client.popLeased('in', { consumerGroup: 'stage' });
    const { partitionId } = pop.messages[0];
    const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);
    freezeLimiterClock();

    // Two of the three: acks of nothing, answered success false.
    for (let n = 0; n < 2; n += 1) expect((await broker.client.ack(bogusAck(partitionId))).status).toBe(200);
    const large = await broker.client.post('/api/v1/transaction', {
      operations: [
        pushOp('out', 'never'),
        ...Array.from({ length: 10_001 }, () => ({ type: 'ack', ...bogusAck(partitionId) })),
      ],
    });

    expect(large.status).toBe(429);
    expect(large.body).toEqual({ error: 'too many requests' });
    expect(Number(large.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);

    // The refusal took nothing: the third fits, and then nothing more.
    const small = await transact(broker.client, {
      operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'once')],
      requiredLeases: [pop.leaseId],
    });
    expect(small).toMatchObject({ status: 200, body: { success: true } });
    expect((await broker.client.ack(bogusAck(partitionId))).status).toBe(429);
    const again = await transact(broker.client, { operations: [{ type: 'ack', ...bogusAck(partitionId) }] });
    expect(again).toMatchObject({ status: 429, body: { error: 'too many requests' } });

    // Pushes alone take nothing of the consumers' budget.
    const pushesOnly = await transact(broker.client, { operations: [pushOp('out', 'pushed-only')] });
    expect(pushesOnly).toMatchObject({ status: 200, body: { success: true } });
  });

  it('lets a transaction of 10001 acks through once the second is fresh, counting two', async () => {
    await broker.client.pushMany('in', 1);
    const pop = await broker.client.popLeased('in', { consumerGroup: 'stage' });
    const { partitionId } = pop.messages[0];
    freezeLimiterClock();

    const large = await transact(broker.client, {
      operations: [
        ackOp(pop, pop.messages[0]),
        ...Array.from({ length: 10_000 }, () => ({ type: 'ack', ...bogusAck(partitionId) })),
      ],
      requiredLeases: [pop.leaseId],
    });

    // Past its first ack every one names no message: the whole transaction rolls back, once counted.
    expect(large).toMatchObject({ status: 200, body: { success: false, reason: 'ack_rejected' } });
    expect(large.body.error).toBe('operations[1]: message not found in this partition');
    expect((await broker.client.ack(bogusAck(partitionId))).status).toBe(200);
    expect((await broker.client.ack(bogusAck(partitionId))).status).toBe(429);
  });
});

// Row locks held across sessions exist only on real PostgreSQL.
(onEmbeddedDatabase ? describe.skip : describe)('a transaction that cannot finish in time', () => {
  const broker = useTestBroker({ DB_STATEMENT_TIMEOUT_MS: '1000', DB_ACQUIRE_TIMEOUT_MS: '1000' });
  let blocker: Client;

  beforeAll(async () => {
    blocker = await openSession();
  });

  afterAll(() => blocker.end());

  it('answers 500 database timeout on its own while the lock it waits for is still held, and applies nothing', async () => {
    const pop = await input();
    await broker.client.pushMany('out', 1);
    const before = await tenantSnapshot(broker.dataSource, broker.client.tenant);
    const body = { operations: [ackOp(pop, pop.messages[0]), pushOp('out', 'late')], requiredLeases: [pop.leaseId] };

    await lockTenantRows(blocker, 'consumers', broker.client.tenant);
    let answer: Answer;
    try {
      answer = await transact(broker.client, body);
    } finally {
      await blocker.query('ROLLBACK');
    }

    expect(answer).toEqual({ status: 500, body: { error: 'database timeout' } });
    expect(await tenantSnapshot(broker.dataSource, broker.client.tenant)).toEqual(before);
    expect((await transact(broker.client, body)).body.success).toBe(true);
  });

  async function input(): Promise<PopBody> {
    await broker.client.pushMany('in', 1);
    return broker.client.popLeased('in', { consumerGroup: 'stage' });
  }
});

// PGlite is one process and runs one transaction at a time: a transaction held open by a lock,
// and NOTIFY between two brokers, exist only on real PostgreSQL.
(onEmbeddedDatabase ? describe.skip : describe)('a transaction and a poll parked on another broker', () => {
  let a: NestExpressApplication;
  let b: NestExpressApplication;
  let observer: Client;

  beforeAll(async () => {
    [a, b] = await Promise.all([createTestApp({ DB_POOL_SIZE: '6' }), createTestApp({ DB_POOL_SIZE: '6' })]);
    observer = new Client({ connectionString: process.env.DATABASE_URL });
    await observer.connect();
  });

  afterAll(async () => {
    await observer.end();
    await Promise.all([a.close(), b.close()]);
  });

  it('wakes the poll only once the transaction commits, and never for one rolled back', async () => {
    const tenant = newTenant();
    const onA = new BrokerClient(a, tenant);
    const onB = new BrokerClient(b, tenant);
    const polls = b.get(ParkedPolls);
    const woken = jest.spyOn(polls, 'wake');
    const wokenQueues = () => woken.mock.calls.filter(([t]) => t === tenant).map(([, queue]) => queue);
    try {
      await onA.pushMany('blocked', 1);
      await onA.pushMany('barrier', 1);
      await onA.pushMany('in', 2);
      const pop = await onA.popLeased('in', { batch: 10 });
      const parked = onB.pop('jobs', { wait: true, timeout: 60_000 }).then((response) => response);
      await waitFor(() => polls.parkedCount(tenant, 'jobs', '__QUEUE_MODE__') === 1, 'the poll parks on b');

      // Rolled back: b hears nothing, and hears the barrier's push committed after it.
      const refused = await transact(onA, {
        operations: [pushOp('jobs', 'never'), { type: 'ack', transactionId: 'nope', partitionId: pop.partitionId }],
      });
      expect(refused.body.success).toBe(false);
      await onA.pushMany('barrier', 1, undefined, 'after-rollback');
      await waitFor(() => wokenQueues().includes('barrier'), 'b hears the push after the rollback');
      expect(wokenQueues()).not.toContain('jobs');

      // Held open after its push to jobs, by a lock on the partition its last push needs.
      await observer.query('BEGIN');
      await observer.query(
        `SELECT 1 FROM partitions p JOIN queues q ON q.id = p.queue_id
          WHERE p.tenant_id = $1 AND q.name = 'blocked' FOR NO KEY UPDATE OF p`,
        [tenant],
      );
      const open = transact(onA, {
        operations: [pushOp('jobs', 'job-1'), ackOp(pop, pop.messages[0]), pushOp('blocked', 'b-2')],
        requiredLeases: [pop.leaseId],
      });
      try {
        await waitForLockWaiter(observer, 'AS t(queue_name, name)');
        await onA.pushMany('barrier', 1, undefined, 'while-open');
        await waitFor(() => wokenQueues().filter((queue) => queue === 'barrier').length >= 2, 'b hears the barrier');
        expect(wokenQueues()).not.toContain('jobs');
        expect(polls.parkedCount(tenant, 'jobs', '__QUEUE_MODE__')).toBe(1);
      } finally {
        await observer.query('COMMIT');
      }

      expect((await open).body.success).toBe(true);
      const answer = await within(parked, 'the poll on b answers', 15_000);
      expect(answer.status).toBe(200);
      expect(answer.body.messages.map((message: PopMessage) => message.transactionId)).toEqual(['job-1']);
    } finally {
      woken.mockRestore();
    }
  });
});
