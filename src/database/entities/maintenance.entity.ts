import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A tenant's maintenance switches; a tenant without a row has neither on. */
@Entity({ name: 'maintenance' })
export class MaintenanceEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_maintenance' })
  tenantId: string;

  @Column({ name: 'pushes_paused', type: 'boolean', default: false })
  pushesPaused: boolean;

  @Column({ name: 'pops_paused', type: 'boolean', default: false })
  popsPaused: boolean;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
