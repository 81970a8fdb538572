import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { HistoryCounts } from './history-counts';
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

  @Column(() => HistoryCounts, { prefix: false })
  counts: HistoryCounts;

  /** The queue's depth (its furthest-behind group's lag) when a broker last flushed this minute. */
  @Column({ name: 'lag', type: 'bigint', nullable: true })
  lag: string | null;
}
