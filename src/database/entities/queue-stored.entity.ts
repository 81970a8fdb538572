import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A share of a queue's stored messages (src/consumer-groups/counters.ts): the count is the sum of its stripes. No foreign
 * key: a write adding to it would wait on a queue being deleted while holding what the deletion waits for.
 */
@Entity({ name: 'queue_stored' })
export class QueueStoredEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_queue_stored' })
  tenantId: string;

  @PrimaryColumn({ name: 'queue_id', type: 'uuid', primaryKeyConstraintName: 'pk_queue_stored' })
  queueId: string;

  @PrimaryColumn({ name: 'stripe', type: 'smallint', primaryKeyConstraintName: 'pk_queue_stored' })
  stripe: number;

  @Column({ name: 'messages', type: 'bigint', default: 0 })
  messages: string;

  @Column({ name: 'partitions', type: 'bigint', default: 0 })
  partitions: string;

  /** The sum of its partitions' last offsets: messages ever pushed to the partitions it still has. */
  @Column({ name: 'offsets', type: 'bigint', default: 0 })
  offsets: string;
}
