import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'partitions' })
export class PartitionEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid' })
  id: string;

  @Column({ name: 'queue_id', type: 'uuid' })
  queueId: string;

  @Column({ name: 'name', type: 'text' })
  name: string;

  /** Highest offset handed out in this partition; pushes lock the row to bump it. */
  @Column({ name: 'last_offset', type: 'bigint' })
  lastOffset: string;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
