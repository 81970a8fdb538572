import { Column, Entity, PrimaryColumn } from 'typeorm';
import { HistoryCounts } from './history-counts';

/** A tenant's queues together in one minute (src/history/): the console's overview reads one row a minute. */
@Entity({ name: 'tenant_history' })
export class TenantHistoryEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_tenant_history' })
  tenantId: string;

  @PrimaryColumn({ name: 'minute', type: 'timestamptz', primaryKeyConstraintName: 'pk_tenant_history' })
  minute: Date;

  @Column(() => HistoryCounts, { prefix: false })
  counts: HistoryCounts;
}
