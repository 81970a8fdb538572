import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { PartitionEntity } from './partition.entity';

/** Table fillfactor 70 (HotLeaseRenewals) is beyond TypeORM; test/entity-schema.e2e-spec.ts checks it instead. */
@Entity({ name: 'consumers' })
// Partial, and without lease_expires_at, so renewals stay heap-only updates.
@Index('idx_consumers_lease', ['tenantId', 'leaseId'], { where: 'lease_id IS NOT NULL' })
// Claims walk only the cursors that may have work, least recently served first (see ReadyCursors).
@Index('idx_consumers_ready', ['tenantId', 'queueId', 'consumerGroup', 'updatedAt', 'partitionId'], { where: 'ready' })
@Index('idx_consumers_group', ['tenantId', 'queueId', 'consumerGroup', 'partitionId'])
// The retention job finds cursors that moved since it last looked at their partition (see RetentionDue).
@Index('idx_consumers_retention_moved', ['tenantId', 'partitionId'], { where: 'committed_offset > retention_seen' })
@ForeignKey(() => PartitionEntity, ['tenantId', 'partitionId'], ['tenantId', 'id'], {
  name: 'fk_consumers_partition',
  onDelete: 'CASCADE',
})
export class ConsumerEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_consumers' })
  tenantId: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid', primaryKeyConstraintName: 'pk_consumers' })
  partitionId: string;

  @PrimaryColumn({ name: 'consumer_group', type: 'text', primaryKeyConstraintName: 'pk_consumers' })
  consumerGroup: string;

  /** The partition's queue, copied so a pop finds the group's cursors through one index. */
  @Column({ name: 'queue_id', type: 'uuid' })
  queueId: string;

  @Column({ name: 'committed_offset', type: 'bigint', default: 0 })
  committedOffset: string;

  /** Highest offset ever delivered to this group here; claims at or below it are redeliveries. */
  @Column({ name: 'delivered_offset', type: 'bigint', default: 0 })
  deliveredOffset: string;

  @Column({ name: 'lease_end_offset', type: 'bigint', nullable: true })
  leaseEndOffset: string | null;

  @Column({ name: 'lease_id', type: 'uuid', nullable: true })
  leaseId: string | null;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt: Date | null;

  /** How many times this cursor has been claimed: the fencing token handed out with each lease. */
  @Column({ name: 'lease_epoch', type: 'bigint', default: 0 })
  leaseEpoch: string;

  /** The latest a lease on this row may run to (LEASE_MAX_TOTAL_SECONDS after its claim); null without a ceiling. */
  @Column({ name: 'lease_deadline', type: 'timestamptz', nullable: true })
  leaseDeadline: Date | null;

  /** With the two below, reset by each claim and shown to operators only. */
  @Column({ name: 'lease_renewals', type: 'integer', default: 0 })
  leaseRenewals: number;

  @Column({ name: 'lease_renewed_at', type: 'timestamptz', nullable: true })
  leaseRenewedAt: Date | null;

  /** Time the lease had left when last renewed. */
  @Column({ name: 'lease_renewal_slack_ms', type: 'integer', nullable: true })
  leaseRenewalSlackMs: number | null;

  @Column({ name: 'retry_count', type: 'integer', default: 0 })
  retryCount: number;

  @Column({ name: 'delivery_attempt', type: 'integer', default: 0 })
  deliveryAttempt: number;

  /** After a nack on a queue with a retryDelay: not claimed again before this instant. */
  @Column({ name: 'retry_at', type: 'timestamptz', nullable: true })
  retryAt: Date | null;

  /** Work may be waiting here: set by pushes, cleared only under the partition's share lock (src/consumer-groups/cursor-ready.ts). */
  @Column({ name: 'ready', type: 'boolean', default: true })
  ready: boolean;

  /** The committed offset the retention job last looked at this partition with; below it, the cursor has moved. */
  @Column({ name: 'retention_seen', type: 'bigint', default: 0 })
  retentionSeen: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
