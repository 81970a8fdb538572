import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A share of a consumer group's lag (src/consumer-groups/counters.ts): its lag is the sum of its stripes. */
@Entity({ name: 'group_lag' })
export class GroupLagEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_group_lag' })
  tenantId: string;

  @PrimaryColumn({ name: 'queue_id', type: 'uuid', primaryKeyConstraintName: 'pk_group_lag' })
  queueId: string;

  @PrimaryColumn({ name: 'consumer_group', type: 'text', primaryKeyConstraintName: 'pk_group_lag' })
  consumerGroup: string;

  @PrimaryColumn({ name: 'stripe', type: 'smallint', primaryKeyConstraintName: 'pk_group_lag' })
  stripe: number;

  /** Messages past its cursors' committed offsets, over the cursors it has. */
  @Column({ name: 'lag', type: 'bigint', default: 0 })
  lag: string;
}
