import { Column, Entity, ForeignKey, Index, PrimaryColumn, Unique } from 'typeorm';
import { QueueEntity } from './queue.entity';

@Entity({ name: 'partitions' })
@Index('idx_partitions_retention_check', ['tenantId', 'retentionCheckAt'], { where: 'retention_check_at IS NOT NULL' })
@Unique('uq_partitions_name', ['tenantId', 'queueId', 'name'])
@ForeignKey(() => QueueEntity, ['tenantId', 'queueId'], ['tenantId', 'id'], {
  name: 'fk_partitions_queue',
  onDelete: 'CASCADE',
})
export class PartitionEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_partitions' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_partitions' })
  id: string;

  @Column({ name: 'queue_id', type: 'uuid' })
  queueId: string;

  @Column({ name: 'name', type: 'text' })
  name: string;

  /** Highest offset handed out in this partition; pushes lock the row to bump it. */
  @Column({ name: 'last_offset', type: 'bigint', default: 0 })
  lastOffset: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  /** When a push last added messages; an empty partition is removed a grace period after it. */
  @Column({ name: 'last_pushed_at', type: 'timestamptz', default: () => 'now()' })
  lastPushedAt: Date;

  /** When the retention job should next look at this partition; null: not before a push. */
  @Column({ name: 'retention_check_at', type: 'timestamptz', nullable: true, default: () => 'now()' })
  retentionCheckAt: Date | null;
}
