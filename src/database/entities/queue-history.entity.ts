import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { QueueEntity } from './queue.entity';

/** What happened to a queue in one minute (src/history/): added to by each broker's flush of its counts. */
@Entity({ name: 'queue_history' })
@Index('idx_queue_history_minute', ['tenantId', 'minute'])
@ForeignKey(() => QueueEntity, ['tenantId', 'queueId'], ['tenantId', 'id'], {
  name: 'fk_queue_history_queue',
  onDelete: 'CASCADE',
})
export class QueueHistoryEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_queue_history' })
  tenantId: string;

  @PrimaryColumn({ name: 'queue_id', type: 'uuid', primaryKeyConstraintName: 'pk_queue_history' })
  queueId: string;

  @PrimaryColumn({ name: 'minute', type: 'timestamptz', primaryKeyConstraintName: 'pk_queue_history' })
  minute: Date;

  @Column({ name: 'pushed', type: 'bigint', default: 0 })
  pushed: string;

  @Column({ name: 'popped', type: 'bigint', default: 0 })
  popped: string;

  @Column({ name: 'acked', type: 'bigint', default: 0 })
  acked: string;

  @Column({ name: 'dead_lettered', type: 'bigint', default: 0 })
  deadLettered: string;

  /** The longest a message delivered in this minute had waited since its push. */
  @Column({ name: 'max_wait_ms', type: 'bigint', nullable: true })
  maxWaitMs: string | null;

  /** The queue's depth (its furthest-behind group's lag) when a broker last flushed this minute. */
  @Column({ name: 'lag', type: 'bigint', nullable: true })
  lag: string | null;
}
