import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A tenant's queues together in one minute (src/history/): the console's overview reads one row a minute. */
@Entity({ name: 'tenant_history' })
export class TenantHistoryEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_tenant_history' })
  tenantId: string;

  @PrimaryColumn({ name: 'minute', type: 'timestamptz', primaryKeyConstraintName: 'pk_tenant_history' })
  minute: Date;

  @Column({ name: 'pushed', type: 'bigint', default: 0 })
  pushed: string;

  @Column({ name: 'popped', type: 'bigint', default: 0 })
  popped: string;

  @Column({ name: 'acked', type: 'bigint', default: 0 })
  acked: string;

  @Column({ name: 'dead_lettered', type: 'bigint', default: 0 })
  deadLettered: string;

  @Column({ name: 'max_wait_ms', type: 'bigint', nullable: true })
  maxWaitMs: string | null;
}
