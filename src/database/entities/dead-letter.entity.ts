import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { QueueEntity } from './queue.entity';

@Entity({ name: 'dead_letters' })
@Index('idx_dead_letters_queue', ['tenantId', 'queueId', 'consumerGroup', 'createdAt'])
@Index('idx_dead_letters_created', ['tenantId', 'createdAt'])
@Index('idx_dead_letters_message', ['tenantId', 'partitionId', 'transactionId'])
@Index('idx_dead_letters_key', ['tenantId', 'keyId', 'id'], { where: 'key_id IS NOT NULL' })
@ForeignKey(() => QueueEntity, ['tenantId', 'queueId'], ['tenantId', 'id'], {
  name: 'fk_dead_letters_queue',
  onDelete: 'CASCADE',
})
export class DeadLetterEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_dead_letters' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_dead_letters' })
  id: string;

  @Column({ name: 'queue_id', type: 'uuid' })
  queueId: string;

  @Column({ name: 'partition_id', type: 'uuid' })
  partitionId: string;

  @Column({ name: 'consumer_group', type: 'text' })
  consumerGroup: string;

  @Column({ name: 'message_id', type: 'uuid' })
  messageId: string;

  @Column({ name: 'seq', type: 'bigint' })
  seq: string;

  @Column({ name: 'transaction_id', type: 'text' })
  transactionId: string;

  @Column({ name: 'trace_id', type: 'text', nullable: true })
  traceId: string | null;

  /** json, not jsonb: the text as the producer sent it, keys, numbers and all. */
  @Column({ name: 'payload', type: 'json', nullable: true })
  payload: unknown;

  /** As the message's payload_bytes; null on rows written before the column existed. */
  @Column({ name: 'payload_bytes', type: 'integer', nullable: true })
  payloadBytes: number | null;

  @Column({ name: 'producer_sub', type: 'text', nullable: true })
  producerSub: string | null;

  @Column({ name: 'message_created_at', type: 'timestamptz' })
  messageCreatedAt: Date;

  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage: string | null;

  @Column({ name: 'retry_count', type: 'integer', default: 0 })
  retryCount: number;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  /** The id of the key the payload is sealed under; null for a plain payload. */
  @Column({ name: 'key_id', type: 'text', nullable: true })
  keyId: string | null;
}
