import { Injectable, NotFoundException } from '@nestjs/common';
import { DatabaseTimeoutError } from '../common/database-errors';
import { uuidv7 } from '../common/uuid';
import { monotonicNow } from '../database/deadline';
import { TransactionRunner } from '../database/transaction-runner';
import { ShuttingDownException } from '../lifecycle/shutting-down.exception';
import { QueuesRepository } from '../queues/queues.repository';
import { WakeupService } from '../wakeup/wakeup.service';
import { PopResponseDto } from './dto/pop-response.dto';
import { PopOptions } from './pop-query.pipe';
import { ClaimedMessage, PopRepository } from './pop.repository';

@Injectable()
export class PopService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly queues: QueuesRepository,
    private readonly pops: PopRepository,
    private readonly wakeup: WakeupService,
  ) {}

  /**
   * Claims messages under one fresh lease, or undefined (204) when there are
   * none. With wait, parks between attempts without a database connection
   * until a push to the queue (from any broker process), the timeout, the
   * caller hanging up or shutdown. The wakeup subscription is taken before
   * each attempt, so a push committed during the attempt still wakes it.
   */
  async pop(
    tenantId: string,
    queue: string,
    partition: string | undefined,
    options: PopOptions,
    signal: AbortSignal,
  ): Promise<PopResponseDto | undefined> {
    const deadline = Date.now() + options.timeoutMs;
    for (;;) {
      const subscription = options.wait ? this.wakeup.subscribe(tenantId, queue) : undefined;
      try {
        const delivery = await this.claim(tenantId, queue, partition, options);
        if (delivery || !subscription) return delivery;
        const outcome = await subscription.wait(Math.max(0, deadline - Date.now()), signal);
        if (outcome === 'closing') throw new ShuttingDownException();
        if (outcome !== 'woken') return undefined;
      } finally {
        subscription?.close();
      }
    }
  }

  private async claim(
    tenantId: string,
    queueName: string,
    partitionName: string | undefined,
    options: PopOptions,
  ): Promise<PopResponseDto | undefined> {
    const leaseId = uuidv7();
    let claimSentAt = 0;
    const { claimed, leaseSeconds } = await this.transactions.run(async (manager) => {
      const queue = await this.queues.find(tenantId, queueName, manager);
      if (!queue) {
        throw new NotFoundException({ error: `queue ${queueName} not found` });
      }
      let partitionId: string | undefined;
      if (partitionName !== undefined) {
        partitionId = await this.queues.findPartitionId(tenantId, queue.id, partitionName, manager);
        if (!partitionId) {
          throw new NotFoundException({ error: `partition ${partitionName} not found in queue ${queueName}` });
        }
      }
      await this.pops.ensureGroup(
        tenantId,
        queue.id,
        options.consumerGroup,
        { newOnly: options.subscriptionMode === 'new', from: options.subscriptionFrom },
        manager,
      );
      await this.pops.ensureConsumers(tenantId, queue.id, partitionId, options.consumerGroup, manager);
      const leaseSeconds = options.leaseSeconds ?? queue.leaseTime;
      claimSentAt = monotonicNow();
      const claimed = await this.pops.claim(
        tenantId,
        {
          queueId: queue.id,
          partitionId,
          consumerGroup: options.consumerGroup,
          leaseId,
          leaseSeconds,
          batch: options.batch,
          maxPartitions: options.partitions,
          autoAck: options.autoAck,
        },
        manager,
      );
      return { claimed, leaseSeconds };
    });
    if (claimed.length === 0) return undefined;
    // The lease runs from the claim, which the server ran after claimSentAt.
    // A database so slow that the lease may already be over is not handed
    // out: the batch is claimable again within a round trip, and the next pop
    // gets it with a live lease.
    if (!options.autoAck && monotonicNow() - claimSentAt >= leaseSeconds * 1000) {
      throw new DatabaseTimeoutError(leaseSeconds * 1000);
    }
    return this.response(queueName, options, options.autoAck ? null : leaseId, claimed);
  }

  private response(
    queue: string,
    options: PopOptions,
    leaseId: string | null,
    claimed: ClaimedMessage[],
  ): PopResponseDto {
    const { consumerGroup } = options;
    return {
      success: true,
      queue,
      partition: claimed[0].partition,
      partitionId: claimed[0].partitionId,
      leaseId,
      consumerGroup,
      messages: claimed.map((message) => ({
        id: message.id,
        transactionId: message.transactionId,
        traceId: message.traceId,
        data: message.data,
        producerSub: message.producerSub,
        createdAt: message.createdAt,
        partitionId: message.partitionId,
        partition: message.partition,
        leaseId,
        consumerGroup,
        deliveryAttempt: message.deliveryAttempt,
      })),
      partitionsClaimed: new Set(claimed.map((message) => message.partitionId)).size,
    };
  }
}
