import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'consumer_groups' })
export class ConsumerGroupEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid' })
  tenantId: string;

  @PrimaryColumn({ name: 'queue_id', type: 'uuid' })
  queueId: string;

  @PrimaryColumn({ name: 'name', type: 'text' })
  name: string;

  /** Messages created before this instant are skipped (subscription mode `new`). */
  @Column({ name: 'subscription_from', type: 'timestamptz', nullable: true })
  subscriptionFrom: Date | null;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
