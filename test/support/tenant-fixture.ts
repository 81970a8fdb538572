import { randomBytes } from 'node:crypto';
import { Database } from '../../src/database/database';
import { uuidv7 } from '../../src/common/uuid';

/** What one tenant owns after a push, a pop that is still leased, a consumer group and a dead letter. */
export interface OwnedQueue {
  queue: string;
  queueId: string;
  partition: string;
  partitionId: string;
  leaseId: string;
  transactionId: string;
  messageIds: string[];
  /** A string only the owner's payloads contain: seeing it anywhere else is a leak. */
  payloadMarker: string;
}

export const CONSUMER_GROUP = 'owner-group';

export const randomHex = (bytes = 4) => randomBytes(bytes).toString('hex');

/**
 * Writes the rows a real workload would leave in a tenant, directly in the
 * tables, so the tenancy probes do not depend on the routes they probe:
 * queue `orders-<hex>` with partition `Default` holding two messages, a live
 * lease on both for the queue-mode consumer, a named consumer group, and one
 * dead letter.
 */
export async function createOwnedQueue(dataSource: Database, tenantId: string): Promise<OwnedQueue> {
  const owned: OwnedQueue = {
    queue: `orders-${randomHex()}`,
    queueId: uuidv7(),
    partition: 'Default',
    partitionId: uuidv7(),
    leaseId: uuidv7(),
    transactionId: `tx-${randomHex()}`,
    messageIds: [uuidv7(), uuidv7()],
    payloadMarker: `owner-payload-${randomHex()}`,
  };
  await dataSource.transaction(async (manager) => {
    await manager.query('INSERT INTO queues (tenant_id, id, name, retry_limit) VALUES ($1, $2, $3, 3)', [
      tenantId,
      owned.queueId,
      owned.queue,
    ]);
    await manager.query(
      'INSERT INTO partitions (tenant_id, id, queue_id, name, last_offset) VALUES ($1, $2, $3, $4, 2)',
      [tenantId, owned.partitionId, owned.queueId, owned.partition],
    );
    for (const [index, messageId] of owned.messageIds.entries()) {
      await manager.query(
        `INSERT INTO messages (tenant_id, partition_id, seq, id, transaction_id, payload, producer_sub)
         VALUES ($1, $2, $3, $4, $5, $6, 'owner')`,
        [
          tenantId,
          owned.partitionId,
          index + 1,
          messageId,
          index === 0 ? owned.transactionId : `${owned.transactionId}-2`,
          JSON.stringify({ marker: owned.payloadMarker }),
        ],
      );
    }
    await manager.query('INSERT INTO consumer_groups (tenant_id, queue_id, name) VALUES ($1, $2, $3)', [
      tenantId,
      owned.queueId,
      CONSUMER_GROUP,
    ]);
    await manager.query(
      `INSERT INTO consumers (tenant_id, queue_id, partition_id, consumer_group, committed_offset, lease_end_offset,
                              lease_id, lease_expires_at, delivery_attempt)
       VALUES ($1, $5, $2, '__QUEUE_MODE__', 0, 2, $3, now() + interval '10 minutes', 1),
              ($1, $5, $2, $4, 0, NULL, NULL, NULL, 0)`,
      [tenantId, owned.partitionId, owned.leaseId, CONSUMER_GROUP, owned.queueId],
    );
    await manager.query(
      `INSERT INTO dead_letters (tenant_id, id, queue_id, partition_id, consumer_group, message_id, seq,
                                 transaction_id, payload, message_created_at, error_message, retry_count)
       VALUES ($1, $2, $3, $4, '__QUEUE_MODE__', $5, 1, $6, $7, now(), 'owner failure', 3)`,
      [
        tenantId,
        uuidv7(),
        owned.queueId,
        owned.partitionId,
        owned.messageIds[0],
        owned.transactionId,
        JSON.stringify({ marker: owned.payloadMarker }),
      ],
    );
  });
  return owned;
}
