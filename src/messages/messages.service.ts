import { BadRequestException, ConflictException, Inject, Injectable, Logger, NotFoundException } from '@nestjs/common';
import { JsonText } from '../common/json-text';
import { isUuid, uuidv7 } from '../common/uuid';
import { zonedTimestamp } from '../common/contract-validators';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TransactionRunner } from '../database/transaction-runner';
import { PushService } from '../push/push.service';
import { QueuesRepository } from '../queues/queues.repository';
import { Writes } from '../wakeup/writes';
import { redeliveriesOf } from '../wakeup/parked-polls';
import { UnitOfWork } from '../database/unit-of-work';
import { UsageChange } from '../limits/stored-usage.repository';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';
import { messageJson } from '../message/message-shape';
import { MessagesRepository, MessageFilter } from './messages.repository';
import {
  ClearQueueResponseDto,
  DeleteMessageResponseDto,
  MessageListQueryDto,
  MoveToDeadLettersResponseDto,
  RetryMessageResponseDto,
} from './dto/messages.dto';

/** The page's own keys, outside its messages. */
const PAGE_ENVELOPE_BYTES = 1_024;
const NOT_A_CURSOR = 'after is not a page cursor';
export const MOVED = 'moved to the dead-letter queue by an operator';

@Injectable()
export class MessagesService {
  private readonly logger = new Logger('Messages');
  private readonly pageBudget: number;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly writes: Writes,
    private readonly messages: MessagesRepository,
    private readonly queues: QueuesRepository,
    private readonly pushes: PushService,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.pageBudget = config.limits.responseMaxBytes - PAGE_ENVELOPE_BYTES;
  }

  /** `{"messages": [...], "next"}` as JSON text: payloads go out as stored. */
  list(tenantId: string, query: MessageListQueryDto): Promise<JsonText> {
    const filter: MessageFilter = {
      queue: query.queue,
      partition: query.partition,
      consumerGroup: query.consumerGroup ?? QUEUE_MODE_GROUP,
      status: query.status,
      from: query.from === undefined ? undefined : zonedTimestamp(query.from),
      to: query.to === undefined ? undefined : zonedTimestamp(query.to),
      limit: query.limit,
      after: query.after === undefined ? undefined : decodeCursor(query.after),
    };
    return this.transactions.read(tenantId, async (reader) => {
      if (!(await reader.run(this.queues.find(tenantId, query.queue)))) {
        throw new NotFoundException({ error: 'queue not found' });
      }
      const { messages, more } = await reader.last(this.messages.page(tenantId, filter, this.pageBudget));
      const last = messages.at(-1);
      const next = more && last ? encodeCursor(last.createdAt, last.partitionId, last.seq) : null;
      const entries = messages.map((message) => messageJson(message, `"status":${JSON.stringify(message.status)}`));
      return new JsonText(`{"messages":[${entries.join(',')}],"next":${JSON.stringify(next)}}`);
    });
  }

  detail(tenantId: string, partitionId: string, transactionId: string): Promise<JsonText> {
    return this.transactions.read(tenantId, async (reader) => {
      const stored = await reader.run(this.messages.find(tenantId, partitionId, transactionId));
      if (!stored) throw new NotFoundException({ error: 'message not found' });
      const groups = await reader.run(this.messages.groupStates(tenantId, stored.queueId, partitionId, transactionId));
      const deadLetters = await reader.last(this.messages.deadLetters(tenantId, partitionId, transactionId));
      const { message } = stored;
      const text = JSON.stringify;
      return new JsonText(
        `{"queue":${text(stored.queue)},"partition":${text(message.partition)},"partitionId":${text(partitionId)},` +
          `"id":${text(message.id)},"transactionId":${text(message.transactionId)},"traceId":${text(message.traceId)},` +
          `"data":${message.dataJson},"producerSub":${text(message.producerSub)},"createdAt":${text(message.createdAt)},` +
          `"groups":${text(groups)},"deadLetters":${text(deadLetters)}` +
          `${message.payloadError === undefined ? '' : `,"error":${text(message.payloadError)}`}}`,
      );
    });
  }

  async delete(tenantId: string, partitionId: string, transactionId: string): Promise<DeleteMessageResponseDto> {
    const outcome = await this.writes.run(tenantId, async (unit) => {
      if (await this.holdCursors(unit, tenantId, partitionId, transactionId)) return 'leased' as const;
      const deleted = await unit.run(this.messages.delete(tenantId, partitionId, transactionId));
      unit.stores(freeing(deleted.freed));
      return deleted;
    });
    if (outcome === 'leased') throw new ConflictException({ error: 'message is under a live lease' });
    if (!outcome.message && outcome.deadLetters === 0) throw new NotFoundException({ error: 'message not found' });
    this.logger.log(
      `Message ${JSON.stringify(transactionId)} of partition ${partitionId} deleted by tenant ${tenantId}` +
        ` (${outcome.deadLetters} dead letters)`,
    );
    return { deleted: true, message: outcome.message, deadLetters: outcome.deadLetters };
  }

  async moveToDeadLetters(
    tenantId: string,
    partitionId: string,
    transactionId: string,
    consumerGroup: string | undefined,
  ): Promise<MoveToDeadLettersResponseDto> {
    const group = consumerGroup ?? QUEUE_MODE_GROUP;
    const deadLetterId = uuidv7();
    const moved = await this.writes.run(tenantId, async (unit) => {
      if (await this.holdCursors(unit, tenantId, partitionId, transactionId)) return 'leased' as const;
      return unit.run(
        this.messages.moveToDeadLetters(tenantId, partitionId, transactionId, group, MOVED, deadLetterId),
      );
    });
    if (moved === 'leased') throw new ConflictException({ error: 'message is under a live lease' });
    if (!moved) throw new NotFoundException({ error: 'message not found' });
    this.logger.log(
      `Message ${JSON.stringify(transactionId)} of partition ${partitionId} moved to the dead letters of group ` +
        `${JSON.stringify(group)} by tenant ${tenantId}`,
    );
    return { moved: true, deadLetterId, consumerGroup: group };
  }

  /** Re-pushed as transactionId `dlq:<original>`, in one unit of work with removing the dead letters. */
  async retry(
    tenantId: string,
    partitionId: string,
    transactionId: string,
    consumerGroup: string | undefined,
  ): Promise<RetryMessageResponseDto> {
    const answer = await this.writes.run(tenantId, async (unit) => {
      const taken = await unit.run(this.messages.takeDeadLetters(tenantId, partitionId, transactionId, consumerGroup));
      if (!taken) throw new NotFoundException({ error: 'dead letter not found' });
      unit.stores(freeing(taken.freed));
      const retryId = `dlq:${transactionId}`;
      const [pushed] = await this.pushes.store(unit, null, [
        {
          queue: taken.copy.queue,
          partition: taken.copy.partition,
          payloadJson: taken.copy.payloadJson,
          transactionId: retryId,
          traceId: taken.copy.traceId ?? undefined,
        },
      ]);
      if (pushed.status === 'failed') throw new ConflictException({ error: pushed.error ?? 'could not store it' });
      return {
        retried: true as const,
        messageId: pushed.message_id!,
        transactionId: retryId,
        queue: taken.copy.queue,
        partition: taken.copy.partition,
        deadLetters: taken.removed,
      };
    });
    this.logger.log(
      `Dead letter ${JSON.stringify(transactionId)} of partition ${partitionId} retried by tenant ${tenantId}`,
    );
    return answer;
  }

  async clear(tenantId: string, queueName: string, partitionName: string | undefined): Promise<ClearQueueResponseDto> {
    const cleared = await this.writes.run(tenantId, async (unit) => {
      const queue = await unit.run(this.queues.find(tenantId, queueName));
      if (!queue) throw new NotFoundException({ error: 'queue not found' });
      let partitionId: string | undefined;
      if (partitionName !== undefined) {
        partitionId = await unit.run(this.queues.partitionId(tenantId, queue.id, partitionName));
        if (!partitionId) throw new NotFoundException({ error: 'partition not found' });
      }
      await unit.run(this.messages.lockCursors(tenantId, queue.id, partitionId));
      const done = await unit.run(this.messages.clear(tenantId, queue.id, partitionId));
      unit.stores(freeing(done.freed));
      return done;
    });
    this.logger.log(
      `Queue ${JSON.stringify(queueName)}${partitionName === undefined ? '' : ` partition ${JSON.stringify(partitionName)}`}` +
        ` of tenant ${tenantId} cleared: ${cleared.messages} messages`,
    );
    return {
      cleared: true,
      queue: queueName,
      ...(partitionName === undefined ? {} : { partition: partitionName }),
      messagesDeleted: cleared.messages,
      partitions: cleared.partitions,
    };
  }

  /**
   * Locks the partition's cursors for a change to one of its messages; true when a live lease covers it. A claim skips
   * the cursors meanwhile, so the unit wakes the polls of those with messages to claim once it commits.
   */
  private async holdCursors(
    unit: UnitOfWork,
    tenantId: string,
    partitionId: string,
    transactionId: string,
  ): Promise<boolean> {
    const held = await unit.run(this.messages.lockLeased(tenantId, partitionId, transactionId));
    if (held.leased) return true;
    for (const redelivery of redeliveriesOf(held.claimable)) unit.redeliver(redelivery);
    return false;
  }
}

function freeing({ bytes, messages }: UsageChange): UsageChange {
  return { bytes: -bytes, messages: -messages };
}

function encodeCursor(createdAt: string, partitionId: string, seq: string): string {
  return Buffer.from(`${createdAt}|${partitionId}|${seq}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: string; partitionId: string; seq: string } {
  const [createdAt, partitionId, seq, ...rest] = Buffer.from(cursor, 'base64url').toString().split('|');
  const valid =
    rest.length === 0 && zonedTimestamp(createdAt) !== undefined && isUuid(partitionId) && /^\d{1,18}$/.test(seq ?? '');
  if (!valid) throw new BadRequestException({ error: NOT_A_CURSOR });
  return { createdAt, partitionId, seq };
}
