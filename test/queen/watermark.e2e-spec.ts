import { newTenant } from '../support/test-app';
import { useTestBroker } from '../support/test-broker';
import { QueenClient } from './queen-client';

/**
 * Queen's client tests seekBackwardsAllowsReconsume, deleteConsumerGroupAllowsReconsume and
 * deleteConsumerGroupForQueueAllowsReconsume, in the order of their steps. Each drains the queue
 * with a group, sees it empty, seeks the group back or deletes it, and must consume every
 * message again at once.
 */
describe("Queen's seek and delete re-consumption tests", () => {
  const broker = useTestBroker();
  const COUNT = 10;

  async function drained(queen: QueenClient, queue: string, group: string): Promise<void> {
    expect((await queen.create(queue, {})).configured).toBe(true);
    for (let index = 0; index < COUNT; index += 1) {
      expect(await queen.pushTo(queue, `p-${index}`, { id: index, batch: 'original' })).toBe(201);
    }
    expect(await queen.consume(queue, group, { concurrency: 5, subscriptionMode: 'all' })).toBe(COUNT);
    expect(await queen.pop(queue, 10, { group })).toEqual([]);
  }

  it('seekBackwardsAllowsReconsume: a seek to before the messages hands every one back', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    const group = 'watermark-seek-test-cg';
    await queen.deleteConsumerGroup(group, true);
    const before = new Date(Date.now() - 1_000).toISOString();
    await drained(queen, 'test-queue-v2-watermark-seek', group);

    const seek = await queen.seekConsumerGroup(group, 'test-queue-v2-watermark-seek', { timestamp: before });

    expect(seek.status).toBe(200);
    expect(seek.body).toMatchObject({ success: true, partitionsUpdated: COUNT });
    expect(await queen.consume('test-queue-v2-watermark-seek', group, { concurrency: 5 })).toBe(COUNT);
  });

  it('deleteConsumerGroupAllowsReconsume: a group deleted everywhere starts again from the beginning', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    const group = 'watermark-delete-test-cg';
    await queen.deleteConsumerGroup(group, true);
    await drained(queen, 'test-queue-v2-watermark-delete', group);

    const deleted = await queen.deleteConsumerGroup(group, true);

    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ success: true, consumerGroup: group, deletedPartitions: COUNT });
    expect(
      await queen.consume('test-queue-v2-watermark-delete', group, { concurrency: 5, subscriptionMode: 'all' }),
    ).toBe(COUNT);
  });

  it('deleteConsumerGroupForQueueAllowsReconsume: so does a group deleted on that queue', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    const group = 'watermark-delete-queue-test-cg';
    const queue = 'test-queue-v2-watermark-delete-queue';
    await queen.deleteConsumerGroupForQueue(group, queue, true);
    await drained(queen, queue, group);

    const deleted = await queen.deleteConsumerGroupForQueue(group, queue, true);

    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ success: true, queueName: queue, deletedPartitions: COUNT });
    expect(await queen.consume(queue, group, { concurrency: 5, subscriptionMode: 'all' })).toBe(COUNT);
  });
});
