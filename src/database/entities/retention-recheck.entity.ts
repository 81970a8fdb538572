import { Entity, PrimaryColumn } from 'typeorm';

/** A partition the retention job should look at though no cursor there moved: a group that held it back was deleted. */
@Entity({ name: 'retention_rechecks' })
export class RetentionRecheckEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_retention_rechecks' })
  tenantId: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid', primaryKeyConstraintName: 'pk_retention_rechecks' })
  partitionId: string;
}
