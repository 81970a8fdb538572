import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { JsonText } from '../common/json-text';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TransactionRunner } from '../database/transaction-runner';
import { QueuesRepository } from '../queues/queues.repository';
import { DlqQuery } from './dlq-query.pipe';
import { DlqRepository } from './dlq.repository';
import { deadLetterJson } from './dead-letter-shape';

/** The page's own keys, outside its dead letters. */
const PAGE_ENVELOPE_BYTES = 1_024;

@Injectable()
export class DlqService {
  private readonly pageBudget: number;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly queues: QueuesRepository,
    private readonly deadLetters: DlqRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.pageBudget = config.limits.responseMaxBytes - PAGE_ENVELOPE_BYTES;
  }

  /**
   * Page and total from one snapshot; shorter than `limit` when the page would pass RESPONSE_MAX_BYTES. A
   * DeadLetterPageDto as JSON text: payloads go out as stored.
   */
  async list(tenantId: string, query: DlqQuery): Promise<JsonText> {
    return this.transactions.read(tenantId, async (reader) => {
      let queueId: string | undefined;
      if (query.queue !== undefined) {
        queueId = (await reader.run(this.queues.find(tenantId, query.queue)))?.id;
        if (!queueId) throw new NotFoundException({ error: 'queue not found' });
      }
      const filter = { queueId, consumerGroup: query.consumerGroup };
      const messages = await reader.run(
        this.deadLetters.page(tenantId, filter, query.limit, query.offset, this.pageBudget),
      );
      const total = await reader.last(this.deadLetters.count(tenantId, filter));
      return new JsonText(`{"messages":[${messages.map(deadLetterJson).join(',')}],"total":${total}}`);
    });
  }
}
