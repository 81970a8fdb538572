import { Injectable, NotFoundException } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';
import { ConfigureCommand } from './dto/configure-request.dto';
import {
  ConfigureResponseDto,
  ConsumerGroupDto,
  DeleteQueueResponseDto,
  QueueDetailDto,
  QueueListDto,
  QueueSummaryDto,
} from './dto/queue-response.dto';
import { ConsumerStats, QueueRecord, QueuesRepository, QueueSummary } from './queues.repository';

@Injectable()
export class QueuesService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly queues: QueuesRepository,
  ) {}

  /** Creates the queue when missing and sets the options sent; the answer echoes those, with the values in force. */
  async configure(tenantId: string, command: ConfigureCommand): Promise<ConfigureResponseDto> {
    const queue = await this.transactions.run((manager) =>
      this.queues.configure(tenantId, command.queue, command.settings, manager),
    );
    const inForce = optionsOf(queue);
    return {
      configured: true,
      queue: queue.name,
      options: Object.fromEntries(command.sent.map((name) => [name, inForce[name]])),
    };
  }

  async list(tenantId: string): Promise<QueueListDto> {
    const summaries = await this.transactions.run((manager) =>
      this.queues.summaries(tenantId, undefined, manager),
    );
    return { queues: summaries.map(toSummary) };
  }

  /** Read in one transaction: one snapshot, and one connection even on the embedded database. */
  async detail(tenantId: string, name: string): Promise<QueueDetailDto> {
    return this.transactions.run(async (manager) => {
      const [summary] = await this.queues.summaries(tenantId, name, manager);
      if (!summary) {
        throw new NotFoundException({ error: `queue ${name} not found` });
      }
      const partitions = await this.queues.partitionStats(tenantId, summary.id, manager);
      const consumers = await this.queues.consumerStats(tenantId, summary.id, manager);
      return { ...toSummary(summary), partitions, consumerGroups: groupsOf(consumers) };
    });
  }

  /** Idempotent: deleting a queue that does not exist (any more) is not an error. */
  async delete(tenantId: string, name: string): Promise<DeleteQueueResponseDto> {
    const existed = await this.transactions.run((manager) => this.queues.delete(tenantId, name, manager));
    return { deleted: existed, queue: name, existed };
  }
}

function optionsOf(queue: QueueRecord): Record<string, unknown> {
  return {
    leaseTime: queue.leaseTime,
    retryLimit: queue.retryLimit,
    deadLetterQueue: queue.deadLetterQueue,
    ...queue.extraOptions,
  };
}

function toSummary(summary: QueueSummary): QueueSummaryDto {
  return {
    name: summary.name,
    options: optionsOf(summary),
    partitionCount: summary.partitions,
    messages: summary.messages,
    deadLetters: summary.deadLetters,
    consumerGroupCount: summary.consumerGroups,
    createdAt: summary.createdAt,
    updatedAt: summary.updatedAt,
  };
}

function groupsOf(consumers: ConsumerStats[]): ConsumerGroupDto[] {
  const groups = new Map<string, ConsumerGroupDto>();
  for (const { consumerGroup, subscriptionFrom, ...partition } of consumers) {
    let group = groups.get(consumerGroup);
    if (!group) {
      group = { name: consumerGroup, subscriptionFrom, lag: 0, liveLeases: 0, partitions: [] };
      groups.set(consumerGroup, group);
    }
    group.lag += partition.lag;
    group.liveLeases += partition.leased ? 1 : 0;
    group.partitions.push(partition);
  }
  return [...groups.values()];
}
