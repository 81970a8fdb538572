import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';
import { StreamQueryEntity } from './stream-query.entity';

/** A stream query's state, per source partition and key; no reference to the partition (see the migration). */
@Entity({ name: 'stream_state' })
@ForeignKey(() => StreamQueryEntity, ['tenantId', 'queryId'], ['tenantId', 'id'], {
  name: 'fk_stream_state_query',
  onDelete: 'CASCADE',
})
export class StreamStateEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_stream_state' })
  tenantId: string;

  @PrimaryColumn({ name: 'query_id', type: 'uuid', primaryKeyConstraintName: 'pk_stream_state' })
  queryId: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid', primaryKeyConstraintName: 'pk_stream_state' })
  partitionId: string;

  @PrimaryColumn({ name: 'key', type: 'text', primaryKeyConstraintName: 'pk_stream_state' })
  key: string;

  @Column({ name: 'value', type: 'jsonb' })
  value: unknown;

  /** Key and value, as counted toward the tenant's stored bytes. */
  @Column({ name: 'bytes', type: 'integer', default: 0 })
  bytes: number;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
