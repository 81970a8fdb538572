import { Injectable, NotFoundException } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';
import { QueuesRepository } from '../queues/queues.repository';
import { DlqQuery } from './dlq-query.pipe';
import { DlqRepository } from './dlq.repository';
import { DeadLetterPageDto } from './dto/dead-letter.dto';

@Injectable()
export class DlqService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly queues: QueuesRepository,
    private readonly deadLetters: DlqRepository,
  ) {}

  /** A page of dead letters, oldest first, with the total matching the filters, from one snapshot. */
  async list(tenantId: string, query: DlqQuery): Promise<DeadLetterPageDto> {
    return this.transactions.run(async (manager) => {
      let queueId: string | undefined;
      if (query.queue !== undefined) {
        queueId = (await this.queues.find(tenantId, query.queue, manager))?.id;
        if (!queueId) throw new NotFoundException({ error: `queue ${query.queue} not found` });
      }
      const filter = { queueId, consumerGroup: query.consumerGroup };
      const messages = await this.deadLetters.page(tenantId, filter, query.limit, query.offset, manager);
      const total = await this.deadLetters.count(tenantId, filter, manager);
      return { messages, total };
    });
  }
}
