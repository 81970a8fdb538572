import { ConflictException, Injectable } from '@nestjs/common';
import { MaintenanceService } from '../maintenance/maintenance.service';
import { EntityManager } from 'typeorm';
import { compositeKey } from '../common/composite-key';
import { uuidv7 } from '../common/uuid';
import { TenantQuotas } from '../limits/tenant-quotas';
import { MetricsService } from '../metrics/metrics.service';
import { QueuesRepository } from '../queues/queues.repository';
import { UnitOfWork, Writes } from '../wakeup/unit-of-work';
import { PushItem } from './dto/push-request.dto';
import { PushResultDto, PushStatus } from './dto/push-result.dto';
import { NewMessage, PushRepository } from './push.repository';

/** The error of an item refused because its queue holds maxSize messages not yet consumed. */
export const QUEUE_FULL = 'queue is full';

@Injectable()
export class PushService {
  constructor(
    private readonly writes: Writes,
    private readonly queues: QueuesRepository,
    private readonly pushes: PushRepository,
    private readonly metrics: MetricsService,
    private readonly quotas: TenantQuotas,
    private readonly maintenance: MaintenanceService,
  ) {}

  /**
   * Stores the items in one transaction: queues and partitions are created on
   * first use, each partition's offsets are assigned under its row lock (so a
   * cursor can never pass an uncommitted lower offset), and a transactionId
   * already present in its partition, earlier in this request included, is a
   * duplicate reporting the original message id.
   */
  async push(tenantId: string, producerSub: string | undefined, items: PushItem[]): Promise<PushResultDto[]> {
    this.maintenance.assertPushesAllowed(tenantId);
    if (items.length === 0) return [];
    return this.writes.run(tenantId, (unit) => this.store(unit, producerSub ?? null, items));
  }

  /** The push's work inside a unit of work, for a push and for a push operation of a transaction. */
  async store(unit: UnitOfWork, producerSub: string | null, items: PushItem[]): Promise<PushResultDto[]> {
    const { tenantId, manager } = unit;
    const queues = await this.queues.ensureQueues(tenantId, [...new Set(items.map((item) => item.queue))], manager);
    await this.quotas.admit(tenantId, 'queues', queues.created, manager);
    const queueIds = queues.ids;
    const queueIdOf = (name: string): string => {
      const id = queueIds.get(name);
      if (!id) {
        throw new ConflictException({ error: 'a queue was deleted while this push was writing to it; retry' });
      }
      return id;
    };
    const wanted = new Map(
      items.map((item) => {
        const queueId = queueIdOf(item.queue);
        return [compositeKey(queueId, item.partition), { queueId, name: item.partition }];
      }),
    );
    const { locked: partitions, created } = await this.queues.lockPartitions(tenantId, [...wanted.values()], manager);
    await this.quotas.admit(tenantId, 'partitions', created, manager);
    const partitionOf = new Map(
      partitions.map((partition) => [compositeKey(partition.queueId, partition.name), partition]),
    );

    const located = items.map((item) => ({
      item,
      partition: partitionOf.get(compositeKey(queueIdOf(item.queue), item.partition))!,
      transactionId: item.transactionId ?? uuidv7(),
    }));
    // Only a transactionId the producer chose can already be stored: one minted here is new by construction.
    const chosen = located.filter(({ item }) => item.transactionId !== undefined);
    const known =
      chosen.length === 0
        ? new Map<string, string>()
        : await this.pushes.findExisting(
            tenantId,
            chosen.map(({ partition, transactionId }) => ({ partitionId: partition.id, transactionId })),
            manager,
          );

    // Room left in queues with a maxSize; past it an item fails rather than being stored.
    const room =
      queues.maxSizes.size === 0 ? new Map<string, number>() : await this.roomLeft(tenantId, queues.maxSizes, manager);

    const lastOffsets = new Map<string, number>();
    const fresh: NewMessage[] = [];
    const perQueue = new Map<string, number>();
    const results = located.map(({ item, partition, transactionId }, index): PushResultDto => {
      const key = compositeKey(partition.id, transactionId);
      const result = (messageId: string | null, status: PushStatus): PushResultDto => ({
        index,
        message_id: messageId,
        transaction_id: transactionId,
        queueName: item.queue,
        status,
        ...(status === 'failed' ? { error: QUEUE_FULL } : {}),
      });
      const original = known.get(key);
      if (original) return result(original, 'duplicate');
      const left = room.get(partition.queueId);
      if (left !== undefined) {
        if (left <= 0) return result(null, 'failed');
        room.set(partition.queueId, left - 1);
      }
      const seq = (lastOffsets.get(partition.id) ?? partition.lastOffset) + 1;
      const id = uuidv7();
      lastOffsets.set(partition.id, seq);
      known.set(key, id);
      unit.push(item.queue, item.partition);
      perQueue.set(item.queue, (perQueue.get(item.queue) ?? 0) + 1);
      const traceId = item.traceId ?? null;
      fresh.push({ partitionId: partition.id, seq, id, transactionId, traceId, payloadJson: item.payloadJson });
      return result(id, 'queued');
    });

    if (fresh.length > 0) {
      await this.pushes.insert(tenantId, producerSub, fresh, lastOffsets, manager);
      unit.afterCommit(() => {
        for (const [queue, count] of perQueue)
          this.metrics.pushedMessages.inc(this.metrics.queue(tenantId, queue), count);
      });
    }
    return results;
  }

  private async roomLeft(
    tenantId: string,
    maxSizes: Map<string, number>,
    manager: EntityManager,
  ): Promise<Map<string, number>> {
    const pending = await this.queues.pending(tenantId, [...maxSizes.keys()], manager);
    return new Map([...maxSizes].map(([queueId, max]) => [queueId, max - (pending.get(queueId) ?? 0)]));
  }
}
