import { Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { TraceEntity } from './trace.entity';

/** A trace under one of its names, newest last in the key: the by-name listing walks it backwards. */
@Entity({ name: 'trace_names' })
@Index('idx_trace_names_trace', ['tenantId', 'traceId'])
@ForeignKey(() => TraceEntity, ['tenantId', 'traceId'], ['tenantId', 'id'], {
  name: 'fk_trace_names_trace',
  onDelete: 'CASCADE',
})
export class TraceNameEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_trace_names' })
  tenantId: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_trace_names' })
  name: string;

  @PrimaryColumn({ name: 'created_at', type: 'timestamptz', primaryKeyConstraintName: 'pk_trace_names' })
  createdAt: Date;

  @PrimaryColumn({ name: 'trace_id', type: 'uuid', primaryKeyConstraintName: 'pk_trace_names' })
  traceId: string;
}
