import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { MessageEntity } from './message.entity';

/** One event a consumer recorded on a message; goes with the message. */
@Entity({ name: 'traces' })
@Index('idx_traces_message', ['tenantId', 'partitionId', 'messageSeq', 'createdAt'])
@ForeignKey(() => MessageEntity, ['tenantId', 'partitionId', 'messageSeq'], ['tenantId', 'partitionId', 'seq'], {
  name: 'fk_traces_message',
  onDelete: 'CASCADE',
})
export class TraceEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_traces' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_traces' })
  id: string;

  @Column({ name: 'partition_id', type: 'uuid' })
  partitionId: string;

  @Column({ name: 'message_seq', type: 'bigint' })
  messageSeq: string;

  @Column({ name: 'event_type', type: 'text' })
  eventType: string;

  /** json, not jsonb: the text as the consumer sent it. */
  @Column({ name: 'data', type: 'json' })
  data: unknown;

  @Column({ name: 'consumer_group', type: 'text' })
  consumerGroup: string;

  /** The id of the broker process that recorded it. */
  @Column({ name: 'worker_id', type: 'text' })
  workerId: string;

  @Column({ name: 'trace_names', type: 'text', array: true })
  traceNames: string[];

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
