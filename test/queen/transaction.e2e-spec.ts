import { sleep } from '../support/sleep';
import { newTenant } from '../support/test-app';
import { useTestBroker } from '../support/test-broker';
import { QueenClient } from './queen-client';

/**
 * Queen's client tests transaction.js (every transaction* test) and
 * complete.js (testComplete), each step as its client sends it, each
 * assertion as its test makes it.
 */
describe("Queen's transaction tests", () => {
  const broker = useTestBroker();
  let queen: QueenClient;

  beforeEach(() => {
    queen = new QueenClient(broker.app, newTenant());
  });

  async function created(...queues: string[]): Promise<void> {
    for (const queue of queues) expect((await queen.create(queue, {})).configured).toBe(true);
  }

  it('transactionBasicPushAck', async () => {
    await created('txn-basic-a', 'txn-basic-b');
    await queen.push('txn-basic-a', { value: 1 });
    const messages = await queen.pop('txn-basic-a', 1);
    expect(messages).toHaveLength(1);

    await queen
      .transaction()
      .queue('txn-basic-b')
      .push([{ data: { value: messages[0].data.value + 1 } }])
      .ack(messages[0])
      .commit();

    const resultB = await queen.pop('txn-basic-b', 1);
    const resultA = await queen.pop('txn-basic-a', 1);
    expect(resultB.map((m) => m.data)).toEqual([{ value: 2 }]);
    expect(resultA).toEqual([]);
  });

  it('transactionMultiplePushes', async () => {
    await created('txn-multi-a', 'txn-multi-b', 'txn-multi-c');
    await queen.push('txn-multi-a', { id: 'source' });
    const [message] = await queen.pop('txn-multi-a', 1);

    await queen
      .transaction()
      .queue('txn-multi-b')
      .push([{ data: { id: 'b', source: message.data.id } }])
      .queue('txn-multi-c')
      .push([{ data: { id: 'c', source: message.data.id } }])
      .ack(message)
      .commit();

    expect(await queen.pop('txn-multi-b', 1)).toHaveLength(1);
    expect(await queen.pop('txn-multi-c', 1)).toHaveLength(1);
    expect(await queen.pop('txn-multi-a', 1)).toEqual([]);
  });

  it('transactionMultipleAcks', async () => {
    await created('txn-multi-ack-a', 'txn-multi-ack-b');
    await queen.push('txn-multi-ack-a', { value: 1 }, { value: 2 }, { value: 3 });
    const messages = await queen.pop('txn-multi-ack-a', 3);
    expect(messages).toHaveLength(3);
    const sum = messages.reduce((total, m) => total + m.data.value, 0);

    await queen
      .transaction()
      .ack(messages[0])
      .ack(messages[1])
      .ack(messages[2])
      .queue('txn-multi-ack-b')
      .push([{ data: { sum } }])
      .commit();

    expect(await queen.pop('txn-multi-ack-a', 3)).toEqual([]);
    expect((await queen.pop('txn-multi-ack-b', 1)).map((m) => m.data)).toEqual([{ sum: 6 }]);
  });

  it('transactionAckWithStatus', async () => {
    expect((await queen.create('txn-ack-status-a', { retryLimit: 0 })).configured).toBe(true);
    expect((await queen.create('txn-ack-status-b', { retryLimit: 0 })).configured).toBe(true);
    await queen.push('txn-ack-status-a', { value: 1 });
    const [message] = await queen.pop('txn-ack-status-a', 1);

    await queen
      .transaction()
      .ack(message, 'failed')
      .queue('txn-ack-status-b')
      .push([{ data: { processed: true } }])
      .commit();

    expect(await queen.pop('txn-ack-status-a', 1)).toEqual([]);
    expect(await queen.pop('txn-ack-status-b', 1)).toHaveLength(1);
  });

  it('transactionAtomicity', async () => {
    await created('txn-atomic-a', 'txn-atomic-b');
    await queen.push('txn-atomic-a', { value: 100 });
    const [message] = await queen.pop('txn-atomic-a', 1);

    await queen
      .transaction()
      .ack(message)
      .queue('txn-atomic-b')
      .push([{ data: { value: 200 } }])
      .commit();

    expect(await queen.pop('txn-atomic-a', 1)).toEqual([]);
    expect((await queen.pop('txn-atomic-b', 1)).map((m) => m.data)).toEqual([{ value: 200 }]);
  });

  it('transactionChainedProcessing', async () => {
    await created('txn-chain-1', 'txn-chain-2', 'txn-chain-3');
    await queen.push('txn-chain-1', { step: 1, value: 10 });

    const [first] = await queen.pop('txn-chain-1', 1);
    await queen
      .transaction()
      .queue('txn-chain-2')
      .push([{ data: { step: 2, value: first.data.value * 2 } }])
      .ack(first)
      .commit();
    const [second] = await queen.pop('txn-chain-2', 1);
    await queen
      .transaction()
      .queue('txn-chain-3')
      .push([{ data: { step: 3, value: second.data.value + 5 } }])
      .ack(second)
      .commit();

    expect((await queen.pop('txn-chain-3', 1)).map((m) => m.data.value)).toEqual([25]);
    expect(await queen.pop('txn-chain-1', 1)).toEqual([]);
    expect(await queen.pop('txn-chain-2', 1)).toEqual([]);
  });

  it('transactionBatchPush', async () => {
    await created('txn-batch-a', 'txn-batch-b');
    await queen.push('txn-batch-a', { id: 'batch-source' });
    const [message] = await queen.pop('txn-batch-a', 1);

    await queen
      .transaction()
      .queue('txn-batch-b')
      .push([1, 2, 3, 4, 5].map((index) => ({ data: { index } })))
      .ack(message)
      .commit();

    expect(await queen.pop('txn-batch-b', 10)).toHaveLength(5);
    expect(await queen.pop('txn-batch-a', 1)).toEqual([]);
  });

  it('transactionWithPartitions', async () => {
    await created('txn-partitions');
    await queen.pushTo('txn-partitions', 'p1', { partition: 'p1', value: 1 });
    await queen.pushTo('txn-partitions', 'p2', { partition: 'p2', value: 2 });
    const [one] = await queen.pop('txn-partitions', 1, { partition: 'p1' });
    const [two] = await queen.pop('txn-partitions', 1, { partition: 'p2' });

    await queen.transaction().ack(one).ack(two).commit();

    expect(await queen.pop('txn-partitions', 1, { partition: 'p1' })).toEqual([]);
    expect(await queen.pop('txn-partitions', 1, { partition: 'p2' })).toEqual([]);
  });

  it('transactionWithConsumer: each() with autoAck(false), limit(3), acking in a transaction', async () => {
    await created('txn-consumer-a', 'txn-consumer-b');
    await queen.push('txn-consumer-a', { value: 1 }, { value: 2 }, { value: 3 });
    let processed = 0;

    for (let round = 0; round < 3; round += 1) {
      const [message] = await queen.pop('txn-consumer-a', 1);
      await queen
        .transaction()
        .queue('txn-consumer-b')
        .push([{ data: { value: message.data.value * 10 } }])
        .ack(message)
        .commit();
      processed += 1;
    }

    expect(processed).toBe(3);
    expect(await queen.pop('txn-consumer-a', 10)).toEqual([]);
    expect(await queen.pop('txn-consumer-b', 10)).toHaveLength(3);
  });

  it('transactionEmptyCommit: refused by the client before anything is sent', async () => {
    await created('txn-empty');
    await expect(queen.transaction().commit()).rejects.toThrow('Transaction has no operations to commit');
  });

  it('transactionLargePayload', async () => {
    await created('txn-large-a', 'txn-large-b');
    await queen.push('txn-large-a', { items: Array.from({ length: 1000 }, (_, id) => ({ id, data: `item-${id}` })) });
    const [message] = await queen.pop('txn-large-a', 1);

    await queen
      .transaction()
      .queue('txn-large-b')
      .push([{ data: { count: message.data.items.length } }])
      .ack(message)
      .commit();

    expect((await queen.pop('txn-large-b', 1)).map((m) => m.data)).toEqual([{ count: 1000 }]);
  });

  it('transactionMultipleQueues', async () => {
    await created('txn-multi-q-a', 'txn-multi-q-b', 'txn-multi-q-c');
    await queen.push('txn-multi-q-a', { source: 'A' });
    await queen.push('txn-multi-q-b', { source: 'B' });
    const [fromA] = await queen.pop('txn-multi-q-a', 1);
    const [fromB] = await queen.pop('txn-multi-q-b', 1);

    await queen
      .transaction()
      .ack(fromA)
      .ack(fromB)
      .queue('txn-multi-q-c')
      .push([{ data: { merged: true } }])
      .commit();

    expect(await queen.pop('txn-multi-q-a', 1)).toEqual([]);
    expect(await queen.pop('txn-multi-q-b', 1)).toEqual([]);
    expect(await queen.pop('txn-multi-q-c', 1)).toHaveLength(1);
  });

  it('transactionRollback: an ack of a message that does not exist rolls the push and the other ack back', async () => {
    expect((await queen.create('txn-rollback-a', { leaseTime: 1 })).configured).toBe(true);
    expect((await queen.create('txn-rollback-b', { leaseTime: 1 })).configured).toBe(true);
    await queen.push('txn-rollback-a', { test: 'rollback' });
    const [message] = await queen.pop('txn-rollback-a', 1);

    await expect(
      queen
        .transaction()
        .queue('txn-rollback-b')
        .push([{ data: { value: 1 } }])
        .ack(message)
        .ack({ transactionId: 'non-existent-id', partitionId: message.partitionId })
        .commit(),
    ).rejects.toThrow('operations[2]: message not found in this partition');

    await sleep(2_000);
    expect(await queen.pop('txn-rollback-b', 10)).toEqual([]);
    expect(await queen.pop('txn-rollback-a', 10)).toHaveLength(1);
  });

  it('transactionAckWithConsumerGroup', async () => {
    await created('txn-cg-a', 'txn-cg-b');
    const consumerGroup = 'test-consumer-group-txn';
    await queen.push('txn-cg-a', { value: 1 }, { value: 2 });
    const messages = await queen.pop('txn-cg-a', 2, { group: consumerGroup });
    expect(messages).toHaveLength(2);

    await queen
      .transaction()
      .ack(messages[0], 'completed', { consumerGroup })
      .ack(messages[1], 'completed', { consumerGroup })
      .queue('txn-cg-b')
      .push([{ data: { sum: messages[0].data.value + messages[1].data.value } }])
      .commit();

    expect(await queen.pop('txn-cg-a', 2, { group: consumerGroup })).toEqual([]);
    expect((await queen.pop('txn-cg-b', 1)).map((m) => m.data)).toEqual([{ sum: 3 }]);
    expect(await queen.pop('txn-cg-a', 2, { group: 'other-consumer-group' })).toHaveLength(2);
  });

  it('testComplete: a three-stage chain, each stage acking its input in the transaction that pushes its output', async () => {
    await created('complete-init', 'complete-next', 'complete-final');
    await queen.push('complete-init', { message: 'First', count: 0 });

    for (const [from, to, message] of [
      ['complete-init', 'complete-next', 'Next'],
      ['complete-next', 'complete-final', 'Final'],
    ]) {
      const [input] = await queen.pop(from, 1);
      await queen
        .transaction()
        .queue(to)
        .push([{ data: { message, count: input.data.count + 1 } }])
        .ack(input)
        .commit();
    }

    const final = await queen.pop('complete-final', 1);
    expect(final.map((m) => m.data)).toEqual([{ message: 'Final', count: 2 }]);
  });
});
