import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A share of what a tenant stores (TenantQuotas): its usage is the sum of its stripes. */
@Entity({ name: 'tenant_usage' })
export class TenantUsageEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_tenant_usage' })
  tenantId: string;

  @PrimaryColumn({ name: 'stripe', type: 'smallint', primaryKeyConstraintName: 'pk_tenant_usage' })
  stripe: number;

  /** Payload bytes of its messages and dead letters, and its stream state. */
  @Column({ name: 'stored_bytes', type: 'bigint', default: 0 })
  storedBytes: string;

  /** Its messages, dead letters and stream state entries. */
  @Column({ name: 'stored_messages', type: 'bigint', default: 0 })
  storedMessages: string;
}
