import { Injectable, Logger, NotFoundException } from '@nestjs/common';
import { EntityManager, QueryFailedError } from 'typeorm';
import { TransactionRunner } from '../database/transaction-runner';
import { TenantQuotas } from '../limits/tenant-quotas';
import { PopRepository } from '../pop/pop.repository';
import { QueuesRepository } from '../queues/queues.repository';
import { UnitOfWork, Writes } from '../wakeup/unit-of-work';
import { Redelivery } from '../wakeup/parked-polls';
import { ConsumerGroupsRepository, GroupPartition, MovedCursor } from './consumer-groups.repository';
import { GROUP_DETAIL_MAX_PARTITIONS } from './dto/consumer-group-query.dto';
import {
  ConsumerGroupDetail,
  ConsumerGroupSummaryDto,
  DeleteConsumerGroupResponseDto,
  GroupPartitionDto,
  LaggingPartitionDto,
  SeekResponseDto,
  SubscriptionMode,
} from './dto/consumer-group-response.dto';

/** A group whose oldest unconsumed message is this old is Lagging (the lagging route's default threshold). */
export const LAGGING_SECONDS = 60;

export type SeekTarget = { toEnd: true } | { timestamp: string };

/** Moves end the group's leases on what they move and wake its parked polls, once committed. */
@Injectable()
export class ConsumerGroupsService {
  private readonly logger = new Logger('ConsumerGroups');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly writes: Writes,
    private readonly groups: ConsumerGroupsRepository,
    private readonly queues: QueuesRepository,
    private readonly pops: PopRepository,
    private readonly quotas: TenantQuotas,
  ) {}

  list(tenantId: string, queue: string | undefined, limit: number): Promise<ConsumerGroupSummaryDto[]> {
    return this.transactions.run(tenantId, async (manager) => {
      if (queue !== undefined) await this.queueOrThrow(tenantId, queue, manager);
      const summaries = await this.groups.summaries(tenantId, queue, limit, manager);
      return summaries.map(({ subscriptionFrom, ...summary }) => ({
        ...summary,
        subscriptionMode: modeOf(subscriptionFrom),
        subscriptionTimestamp: subscriptionFrom,
        state: summary.maxTimeLag >= LAGGING_SECONDS ? 'Lagging' : 'Stable',
      }));
    });
  }

  lagging(tenantId: string, minLagSeconds: number, limit: number): Promise<LaggingPartitionDto[]> {
    return this.transactions.run(tenantId, (manager) => this.groups.lagging(tenantId, minLagSeconds, limit, manager));
  }

  detail(tenantId: string, group: string, queue: string | undefined): Promise<ConsumerGroupDetail> {
    return this.transactions.run(tenantId, async (manager) => {
      const queues = await this.groups.queuesOf(tenantId, group, queue, manager);
      const partitions = await this.groups.partitionsOf(tenantId, group, queue, GROUP_DETAIL_MAX_PARTITIONS, manager);
      const detail: ConsumerGroupDetail = {};
      for (const { queueName, subscriptionFrom, partitionCount } of queues) {
        detail[queueName] = {
          subscriptionMode: modeOf(subscriptionFrom),
          subscriptionTimestamp: subscriptionFrom,
          partitionCount,
          partitions: [],
        };
      }
      for (const partition of partitions) detail[partition.queueName]?.partitions.push(partitionOnly(partition));
      return detail;
    });
  }

  async delete(tenantId: string, group: string, queue: string | undefined): Promise<DeleteConsumerGroupResponseDto> {
    const forgotten = await retriedWhileLocked(() =>
      this.writes.run(tenantId, async (unit) => {
        const { moved, partitions } = await this.groups.delete(tenantId, group, queue, unit.manager);
        // A poll of the group starts afresh, whether or not the group had cursors.
        wake(unit, group, moved, queue !== undefined ? [queue] : [...new Set(moved.map((cursor) => cursor.queueName))]);
        unit.afterCommit(() => this.quotas.forget(tenantId));
        return partitions;
      }),
    );
    this.logger.log(
      `Consumer group ${JSON.stringify(group)} forgotten on ${queue === undefined ? 'every queue' : `queue ${JSON.stringify(queue)}`}` +
        ` of tenant ${tenantId}: ${forgotten} partitions`,
    );
    return {
      success: true,
      consumerGroup: group,
      ...(queue === undefined ? {} : { queueName: queue }),
      deletedPartitions: forgotten,
    };
  }

  async seek(
    tenantId: string,
    group: string,
    queueName: string,
    partitionName: string | undefined,
    target: SeekTarget,
  ): Promise<SeekResponseDto> {
    // Created in a transaction of its own: holding the queue row lock while waiting for cursors an ack holds (the ack
    // then waits for the queue row) would deadlock. Should the move then fail, the group exists at its start.
    await this.writes.run(tenantId, async ({ manager }) => {
      const queue = await this.queueOrThrow(tenantId, queueName, manager);
      if (await this.groups.groupExists(tenantId, queue.id, group, manager)) return;
      const created = await this.pops.ensureGroup(
        tenantId,
        queue.id,
        group,
        { newOnly: false, from: undefined },
        manager,
      );
      await this.quotas.admit(tenantId, 'consumerGroups', created ? 1 : 0, manager);
    });
    const moved = await this.writes.run(tenantId, async (unit) => {
      const queue = await this.queueOrThrow(tenantId, queueName, unit.manager);
      let partitionId: string | undefined;
      if (partitionName !== undefined) {
        partitionId = await this.queues.partitionId(tenantId, queue.id, partitionName, unit.manager);
        if (partitionId === undefined) throw new NotFoundException({ error: 'partition not found' });
      }
      const timestamp = 'timestamp' in target ? target.timestamp : undefined;
      const { moved: cursors, partitions } = await this.groups.seek(
        tenantId,
        queue,
        group,
        partitionId,
        timestamp,
        unit.manager,
      );
      // Back in time over the whole queue, partitions without a cursor may have something again too.
      wake(unit, group, cursors, timestamp !== undefined && partitionId === undefined ? [queue.name] : []);
      return partitions;
    });
    this.logger.log(
      `Consumer group ${JSON.stringify(group)} sought to ${'toEnd' in target ? 'the end' : target.timestamp} on queue ` +
        `${JSON.stringify(queueName)}${partitionName === undefined ? '' : ` partition ${JSON.stringify(partitionName)}`}` +
        ` of tenant ${tenantId}: ${moved} partitions`,
    );
    return {
      success: true,
      consumerGroup: group,
      queueName,
      ...(partitionName === undefined ? {} : { partition: partitionName }),
      partitionsUpdated: moved,
    };
  }

  private async queueOrThrow(tenantId: string, name: string, manager: EntityManager) {
    const queue = await this.queues.find(tenantId, name, manager);
    if (!queue) throw new NotFoundException({ error: 'queue not found' });
    return queue;
  }
}

const LOCK_NOT_AVAILABLE = '55P03';
const LOCKED_ATTEMPTS = 5;

/** Runs a unit of work again, a little later each time, while it finds a row it would not wait for locked. */
async function retriedWhileLocked<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      const code = error instanceof QueryFailedError ? (error.driverError as { code?: string }).code : undefined;
      if (code !== LOCK_NOT_AVAILABLE || attempt === LOCKED_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    }
  }
}

function modeOf(subscriptionFrom: string | null): SubscriptionMode {
  return subscriptionFrom === null ? 'all' : 'new';
}

/**
 * Parked polls of the group wake for what its moved cursors can claim now; on `everywhere` queues, every poll of the
 * group that waits on the queue as a whole, for what its starting point now places in partitions without a cursor.
 */
function wake(unit: UnitOfWork, group: string, moved: MovedCursor[], everywhere: string[]): void {
  const byQueue = new Map<string, Redelivery>();
  const of = (queueName: string): Redelivery => {
    let redelivery = byQueue.get(queueName);
    if (!redelivery) {
      redelivery = { queue: queueName, consumerGroup: group, partitions: new Map() };
      byQueue.set(queueName, redelivery);
    }
    return redelivery;
  };
  for (const { queueName, partition, claimable } of moved) {
    if (claimable > 0) of(queueName).partitions.set(partition, claimable);
  }
  // No partition of that name: only the polls of the whole queue count it.
  for (const queueName of everywhere) of(queueName).partitions.set('', EVERY_POLL);
  for (const redelivery of byQueue.values()) unit.redeliver(redelivery);
}

/** More polls than a process parks for one group: POP_MAX_WAITING_PER_TENANT is at most 1,000,000. */
const EVERY_POLL = 1_000_000;

function partitionOnly({ consumerGroup: _group, queueName: _queue, ...partition }: GroupPartition): GroupPartitionDto {
  return partition;
}
