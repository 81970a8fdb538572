import { Column, Entity, ForeignKey, Index, PrimaryColumn, Unique } from 'typeorm';
import { QueueEntity } from './queue.entity';

/** A query of Queen's streaming SDK, registered by name; it goes with its source queue. */
@Entity({ name: 'stream_queries' })
@Unique('uq_stream_queries_name', ['tenantId', 'name'])
@Index('idx_stream_queries_queue', ['tenantId', 'sourceQueueId'])
@ForeignKey(() => QueueEntity, ['tenantId', 'sourceQueueId'], ['tenantId', 'id'], {
  name: 'fk_stream_queries_queue',
  onDelete: 'CASCADE',
})
export class StreamQueryEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_stream_queries' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_stream_queries' })
  id: string;

  @Column({ name: 'name', type: 'text' })
  name: string;

  @Column({ name: 'source_queue_id', type: 'uuid' })
  sourceQueueId: string;

  /** As the SDK names it; not a reference, the sink may be created later by the cycles' pushes. */
  @Column({ name: 'sink_queue', type: 'text', nullable: true })
  sinkQueue: string | null;

  /** The SDK's fingerprint of the operator chain: state kept under another chain is refused unless reset. */
  @Column({ name: 'config_hash', type: 'text' })
  configHash: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
