import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** A name's traces on one message: what the name's message count counts; kept by the trigger on traces. */
@Entity({ name: 'trace_name_messages' })
@Index('idx_trace_name_messages_seen', ['tenantId', 'name', 'lastSeen'])
export class TraceNameMessageEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_trace_name_messages' })
  tenantId: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_trace_name_messages' })
  name: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid', primaryKeyConstraintName: 'pk_trace_name_messages' })
  partitionId: string;

  @PrimaryColumn({ name: 'message_seq', type: 'bigint', primaryKeyConstraintName: 'pk_trace_name_messages' })
  messageSeq: string;

  @Column({ name: 'traces', type: 'integer' })
  traces: number;

  @Column({ name: 'last_seen', type: 'timestamptz' })
  lastSeen: Date;
}
