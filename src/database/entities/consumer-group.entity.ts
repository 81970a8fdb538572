import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';
import { QueueEntity } from './queue.entity';

@Entity({ name: 'consumer_groups' })
@ForeignKey(() => QueueEntity, ['tenantId', 'queueId'], ['tenantId', 'id'], {
  name: 'fk_consumer_groups_queue',
  onDelete: 'CASCADE',
})
export class ConsumerGroupEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_consumer_groups' })
  tenantId: string;

  @PrimaryColumn({ name: 'queue_id', type: 'uuid', primaryKeyConstraintName: 'pk_consumer_groups' })
  queueId: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_consumer_groups' })
  name: string;

  /** Messages created before this instant are skipped (subscription mode `new`). */
  @Column({ name: 'subscription_from', type: 'timestamptz', nullable: true })
  subscriptionFrom: Date | null;

  /**
   * The last partition name the group has looked through for cursors to create ('' before the first); null once
   * there is none left (every partition has one where the group has something to read).
   */
  @Column({ name: 'backfill_from', type: 'text', nullable: true })
  backfillFrom: string | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;
}
