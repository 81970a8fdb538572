import {
  consume,
  LeaseholdClient,
  LeaseLostError,
  TransactionFailedError,
  type ConsumeStage,
  type Message,
  type TransactionRequest,
} from '../src';
import { FakeBroker } from './fake-broker';
import { aborted, waitFor } from './test-helpers';

describe('transactions', () => {
  let broker: FakeBroker;
  let client: LeaseholdClient;

  beforeEach(async () => {
    broker = await FakeBroker.start();
    client = new LeaseholdClient({ baseUrl: broker.baseUrl });
  });

  afterEach(() => broker.close());

  const sent = (): TransactionRequest[] =>
    broker.requestsTo('transaction').map((request) => request.body as TransactionRequest);

  describe('the builder', () => {
    it("sends each ack with its message's lease and epoch, requires those leases, and pushes with the partition given", async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      const batch = (await client.pop('in', { consumerGroup: 'stage' }))!;
      const [message] = batch.messages;

      const result = await client
        .transaction()
        .ack(message)
        .push('out', [{ payload: { doubled: 2 }, transactionId: 'out-1' }], { partition: 'p1' })
        .commit();

      expect(result.success).toBe(true);
      expect(sent()).toEqual([
        {
          operations: [
            {
              type: 'ack',
              transactionId: message.transactionId,
              partitionId: message.partitionId,
              status: 'completed',
              consumerGroup: 'stage',
              leaseId: batch.leaseId,
              leaseEpoch: 1,
            },
            {
              type: 'push',
              items: [{ queue: 'out', partition: 'p1', payload: { doubled: 2 }, transactionId: 'out-1' }],
            },
          ],
          requiredLeases: [batch.leaseId],
        },
      ]);
      expect((await client.pop('out'))!.messages.map((m) => m.data)).toEqual([{ doubled: 2 }]);
      expect(await client.pop('in', { consumerGroup: 'stage' })).toBeNull();
    });

    it('refuses an empty transaction without sending it', async () => {
      await expect(client.transaction().commit()).rejects.toThrow('the transaction has no operations to commit');
      expect(sent()).toEqual([]);
    });

    it('rejects a rolled-back transaction with its reason, and nothing of it is visible', async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      const batch = (await client.pop('in', { leaseSeconds: 1 }))!;
      broker.advanceClock(2_000);

      const failure = await client
        .transaction()
        .push('out', [{ payload: 'never' }])
        .ack(batch.messages[0])
        .commit()
        .catch((error: unknown) => error);

      expect(failure).toBeInstanceOf(TransactionFailedError);
      expect(failure).toMatchObject({ reason: 'lease_lost', brokerError: 'operations[1]: invalid or expired lease' });
      expect(await client.pop('out')).toBeNull();
    });

    it('resolves a replay of a committed transaction, answered duplicate, instead of throwing', async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      const [message] = (await client.pop('in'))!.messages;
      const transaction = client
        .transaction()
        .ack(message)
        .push('out', [{ payload: 'once', transactionId: 'out-once' }]);
      await transaction.commit();

      const replay = await transaction.commit();

      expect(replay).toMatchObject({ success: false, reason: 'duplicate' });
      const out = await client.pop('out', { batch: 10 });
      expect(out!.messages.map((m) => m.data)).toEqual(['once']);
    });
  });

  describe('consume with a handler returning a transaction', () => {
    let stop: AbortController;
    let running: Promise<void> | undefined;
    let errors: [unknown, ConsumeStage][];
    let lost: [LeaseLostError, Message[]][];

    beforeEach(() => {
      stop = new AbortController();
      running = undefined;
      errors = [];
      lost = [];
    });

    afterEach(async () => {
      stop.abort();
      await running?.catch(() => undefined);
    });

    function stage(handler: (messages: Message<number>[], signal: AbortSignal) => unknown, leaseSeconds = 30): void {
      running = consume<number>('in', (messages, { signal }) => handler(messages, signal), {
        client,
        signal: stop.signal,
        waitTimeoutMs: 2_000,
        batch: 10,
        leaseSeconds,
        onError: (error, where) => errors.push([error, where]),
        onLeaseLost: (error, messages) => lost.push([error, messages]),
      });
    }

    it('commits the output with an ack of every input message under the lease, and sends no separate ack', async () => {
      await client.push([1, 2, 3].map((n) => ({ queue: 'in', payload: n })));

      stage((messages) =>
        client.transaction().push(
          'out',
          messages.map((m) => ({ payload: m.data * 10, transactionId: `out-${m.transactionId}` })),
        ),
      );

      await waitFor(() => sent().length === 1);
      await waitFor(() => broker.requestsTo('pop').length >= 2);
      const [request] = sent();
      expect(request.operations.filter((op) => op.type === 'ack')).toHaveLength(3);
      expect(request.requiredLeases).toHaveLength(1);
      expect(broker.requestsTo('ack-batch')).toEqual([]);
      expect((await client.pop('out', { batch: 10 }))!.messages.map((m) => m.data)).toEqual([10, 20, 30]);
      expect(errors).toEqual([]);
    });

    it('keeps renewing the lease until the commit answers', async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      broker.stall('transaction', 2_500);

      stage(
        (messages) =>
          client.transaction().push(
            'out',
            messages.map((m) => ({ payload: m.data })),
          ),
        1,
      );

      await waitFor(() => sent().length === 1);
      const extendsBefore = broker.requestsTo('extend').length;
      await waitFor(() => broker.requestsTo('extend').length >= extendsBefore + 3, 10_000);
      await waitFor(() => broker.requestsTo('pop').length >= 2, 10_000);
      expect(lost).toEqual([]);
    });

    it('pushes nothing when the lease is lost mid-handler, and reports the loss', async () => {
      await client.push([{ queue: 'in', payload: 7 }]);
      let calls = 0;

      stage(async (messages, signal) => {
        calls += 1;
        if (calls === 1) {
          // Frozen past its lease: the next renewal finds it gone, and the handler is told.
          broker.advanceClock(5_000);
          await aborted(signal);
        }
        return client.transaction().push(
          'out',
          messages.map((m) => ({ payload: m.data })),
        );
      }, 2);

      await waitFor(() => lost.length === 1);
      expect(lost[0][0].kind).toBe('not-renewed');
      await waitFor(() => calls === 2 && sent().length === 1);
      await waitFor(() => broker.requestsTo('pop').length >= 3);
      expect(sent()).toHaveLength(1);
      const out = await client.pop('out', { batch: 10 });
      expect(out!.messages.map((m) => m.data)).toEqual([7]);
    });

    it('reports a commit the broker rolls back for the lease as lost, through onLeaseLost with commit-rejected', async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      let calls = 0;

      stage((messages) => {
        calls += 1;
        // The lease ends by the broker's clock after the handler is done, before the commit.
        if (calls === 1) broker.advanceClock(3_000);
        return client.transaction().push(
          'out',
          messages.map((m) => ({ payload: m.data })),
        );
      }, 2);

      await waitFor(() => lost.length === 1);
      expect(lost[0][0]).toMatchObject({ kind: 'commit-rejected' });
      expect(lost[0][0].cause).toBeInstanceOf(TransactionFailedError);
      await waitFor(() => calls === 2);
      await waitFor(() => sent().length === 2);
      expect((await client.pop('out', { batch: 10 }))!.messages.map((m) => m.data)).toEqual([1]);
    });

    it('nacks the batch when the commit is rolled back for a reason of its own', async () => {
      await client.push([{ queue: 'in', payload: 1 }]);
      broker.failNext(
        'transaction',
        200,
        JSON.stringify({
          transactionId: 't',
          success: false,
          reason: 'bad_request',
          error: 'operations[0].items[0].payload is required (null is allowed)',
          results: [],
        }),
      );

      stage((messages) =>
        client.transaction().push(
          'out',
          messages.map((m) => ({ payload: m.data })),
        ),
      );

      await waitFor(() => broker.requestsTo('ack-batch').length === 1);
      expect(errors).toEqual([[expect.any(TransactionFailedError), 'commit']]);
      expect(
        (broker.requestsTo('ack-batch')[0].body as { acknowledgments: Array<{ status: string }> }).acknowledgments,
      ).toEqual([expect.objectContaining({ status: 'failed' })]);
      expect(lost).toEqual([]);
    });
  });
});
