import { Column, Entity, ForeignKey, Index, PrimaryColumn, Unique } from 'typeorm';
import { PartitionEntity } from './partition.entity';

@Entity({ name: 'messages' })
@Unique('uq_messages_transaction', ['tenantId', 'partitionId', 'transactionId'])
@Index('idx_messages_key', ['tenantId', 'keyId', 'partitionId', 'seq'], { where: 'key_id IS NOT NULL' })
@ForeignKey(() => PartitionEntity, ['tenantId', 'partitionId'], ['tenantId', 'id'], {
  name: 'fk_messages_partition',
  onDelete: 'CASCADE',
})
export class MessageEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_messages' })
  tenantId: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid', primaryKeyConstraintName: 'pk_messages' })
  partitionId: string;

  @PrimaryColumn({ name: 'seq', type: 'bigint', primaryKeyConstraintName: 'pk_messages' })
  seq: string;

  @Column({ name: 'id', type: 'uuid' })
  id: string;

  @Column({ name: 'transaction_id', type: 'text' })
  transactionId: string;

  @Column({ name: 'trace_id', type: 'text', nullable: true })
  traceId: string | null;

  /** json, not jsonb: the text as the producer sent it, keys, numbers and all. */
  @Column({ name: 'payload', type: 'json', nullable: true })
  payload: unknown;

  /** The stored text's size, written by the push; a row without it is measured when read. */
  @Column({ name: 'payload_bytes', type: 'integer', nullable: true })
  payloadBytes: number | null;

  @Column({ name: 'producer_sub', type: 'text', nullable: true })
  producerSub: string | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  /** The id of the key the payload is sealed under; null for a plain payload. */
  @Column({ name: 'key_id', type: 'text', nullable: true })
  keyId: string | null;
}
