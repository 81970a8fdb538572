import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { isoTimestamp } from '../common/sql-timestamp';
import { PayloadCipher } from '../encryption/payload-cipher';
import { StoredDeadLetter } from './dead-letter-shape';

export interface DeadLetterFilter {
  queueId: string | undefined;
  consumerGroup: string | undefined;
}

const FILTER = `d.tenant_id = $1
  AND ($2::uuid IS NULL OR d.queue_id = $2::uuid)
  AND ($3::text IS NULL OR d.consumer_group = $3)`;

/** What a dead letter adds to a page besides its payload, error and names: keys, ids, timestamps. */
const DEAD_LETTER_ENVELOPE_BYTES = 400;

@Injectable()
export class DlqRepository {
  constructor(private readonly cipher: PayloadCipher) {}

  /** Cut short before `maxBytes` (the first one always comes): a client pages on by the number it received. */
  async page(
    tenantId: string,
    filter: DeadLetterFilter,
    limit: number,
    offset: number,
    maxBytes: number,
    manager: EntityManager,
  ): Promise<StoredDeadLetter[]> {
    const rows: Array<Record<string, unknown>> = await manager.query(
      `SELECT measured.* FROM (
         SELECT page.*,
                sum(octet_length(page.payload::text) + coalesce(octet_length(page.error_message), 0)
                    + octet_length(page.transaction_id) + coalesce(octet_length(page.trace_id), 0)
                    + coalesce(octet_length(page.producer_sub), 0) + octet_length(page.queue)
                    + octet_length(page.partition) + octet_length(page.consumer_group) + ${DEAD_LETTER_ENVELOPE_BYTES})
                  OVER (ORDER BY page.failed_order, page.partition_id, page.seq, page.id) AS answer_bytes,
                row_number() OVER (ORDER BY page.failed_order, page.partition_id, page.seq, page.id) AS position
           FROM (SELECT d.id, d.message_id, d.transaction_id, d.trace_id, d.payload::text AS payload, d.key_id, d.producer_sub,
                        d.error_message,
                        d.retry_count, q.name AS queue, p.name AS partition, d.partition_id, d.consumer_group, d.seq,
                        d.created_at AS failed_order,
                        ${isoTimestamp('d.message_created_at')} AS created_at, ${isoTimestamp('d.created_at')} AS failed_at
                   FROM dead_letters d
                   JOIN queues q ON q.tenant_id = d.tenant_id AND q.id = d.queue_id
                   JOIN partitions p ON p.tenant_id = d.tenant_id AND p.id = d.partition_id
                  WHERE ${FILTER}
                  ORDER BY d.created_at, d.partition_id, d.seq, d.id
                  LIMIT $4 OFFSET $5) page
       ) measured
       WHERE measured.answer_bytes <= $6 OR measured.position = 1
       ORDER BY measured.position`,
      [tenantId, filter.queueId ?? null, filter.consumerGroup ?? null, limit, offset, maxBytes],
    );
    return rows.map((row) => {
      const opened = this.cipher.openOrReport(row.key_id as string | null, row.payload as string, row.id as string);
      return {
        id: row.id as string,
        messageId: row.message_id as string,
        transactionId: row.transaction_id as string,
        traceId: row.trace_id as string | null,
        dataJson: opened.json,
        producerSub: row.producer_sub as string | null,
        errorMessage: row.error_message as string | null,
        retryCount: row.retry_count as number,
        queue: row.queue as string,
        partition: row.partition as string,
        partitionId: row.partition_id as string,
        consumerGroup: row.consumer_group as string,
        createdAt: row.created_at as string,
        failedAt: row.failed_at as string,
        error: opened.error,
      };
    });
  }

  async count(tenantId: string, filter: DeadLetterFilter, manager: EntityManager): Promise<number> {
    const [row]: Array<{ total: number }> = await manager.query(
      `SELECT count(*)::int AS total FROM dead_letters d WHERE ${FILTER}`,
      [tenantId, filter.queueId ?? null, filter.consumerGroup ?? null],
    );
    return row.total;
  }
}
