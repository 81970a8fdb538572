import { Injectable } from '@nestjs/common';
import { raw, shared, Sql, sql, Statement, statement } from '../database/statement';
import { isoTimestamp } from '../common/sql-timestamp';
import { PayloadCipher } from '../encryption/payload-cipher';
import { StoredDeadLetter } from './dead-letter-shape';

export interface DeadLetterFilter {
  queueId: string | undefined;
  consumerGroup: string | undefined;
}

function filtered(tenantId: string, { queueId, consumerGroup }: DeadLetterFilter): Sql {
  const queue = shared(queueId ?? null);
  const group = shared(consumerGroup ?? null);
  return sql`d.tenant_id = ${tenantId}
  AND (${queue}::uuid IS NULL OR d.queue_id = ${queue}::uuid)
  AND (${group}::text IS NULL OR d.consumer_group = ${group})`;
}

/** What a dead letter adds to a page besides its payload, error and names: keys, ids, timestamps. */
const DEAD_LETTER_ENVELOPE_BYTES = 400;

interface DeadLetterRow {
  id: string;
  message_id: string;
  transaction_id: string;
  trace_id: string | null;
  payload: string;
  key_id: string | null;
  producer_sub: string | null;
  error_message: string | null;
  retry_count: number;
  queue: string;
  partition: string;
  partition_id: string;
  consumer_group: string;
  created_at: string;
  failed_at: string;
}

@Injectable()
export class DlqRepository {
  constructor(private readonly cipher: PayloadCipher) {}

  /** Cut short before `maxBytes` (the first one always comes): a client pages on by the number it received. */
  page(
    tenantId: string,
    filter: DeadLetterFilter,
    limit: number,
    offset: number,
    maxBytes: number,
  ): Statement<StoredDeadLetter[]> {
    return statement(
      sql`SELECT measured.* FROM (
         SELECT page.*,
                sum(octet_length(page.payload::text) + coalesce(octet_length(page.error_message), 0)
                    + octet_length(page.transaction_id) + coalesce(octet_length(page.trace_id), 0)
                    + coalesce(octet_length(page.producer_sub), 0) + octet_length(page.queue)
                    + octet_length(page.partition) + octet_length(page.consumer_group) + ${raw(String(DEAD_LETTER_ENVELOPE_BYTES))})
                  OVER (ORDER BY page.failed_order, page.partition_id, page.seq, page.id) AS answer_bytes,
                row_number() OVER (ORDER BY page.failed_order, page.partition_id, page.seq, page.id) AS position
           FROM (SELECT d.id, d.message_id, d.transaction_id, d.trace_id, d.payload::text AS payload, d.key_id, d.producer_sub,
                        d.error_message,
                        d.retry_count, q.name AS queue, p.name AS partition, d.partition_id, d.consumer_group, d.seq,
                        d.created_at AS failed_order,
                        ${raw(isoTimestamp('d.message_created_at'))} AS created_at, ${raw(isoTimestamp('d.created_at'))} AS failed_at
                   FROM dead_letters d
                   JOIN queues q ON q.tenant_id = d.tenant_id AND q.id = d.queue_id
                   JOIN partitions p ON p.tenant_id = d.tenant_id AND p.id = d.partition_id
                  WHERE ${filtered(tenantId, filter)}
                  ORDER BY d.created_at, d.partition_id, d.seq, d.id
                  LIMIT ${limit} OFFSET ${offset}) page
       ) measured
       WHERE measured.answer_bytes <= ${maxBytes} OR measured.position = 1
       ORDER BY measured.position`,
      (rows: DeadLetterRow[]) =>
        rows.map((row) => {
          const opened = this.cipher.openOrReport(row.key_id, row.payload, row.id);
          return {
            id: row.id,
            messageId: row.message_id,
            transactionId: row.transaction_id,
            traceId: row.trace_id,
            dataJson: opened.json,
            producerSub: row.producer_sub,
            errorMessage: row.error_message,
            retryCount: row.retry_count,
            queue: row.queue,
            partition: row.partition,
            partitionId: row.partition_id,
            consumerGroup: row.consumer_group,
            createdAt: row.created_at,
            failedAt: row.failed_at,
            error: opened.error,
          };
        }),
    );
  }

  count(tenantId: string, filter: DeadLetterFilter): Statement<number> {
    return statement(
      sql`SELECT count(*)::int AS total FROM dead_letters d WHERE ${filtered(tenantId, filter)}`,
      ([row]: Array<{ total: number }>) => row.total,
    );
  }
}
