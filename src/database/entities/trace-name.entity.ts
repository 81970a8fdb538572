import { Entity, PrimaryColumn } from 'typeorm';

/**
 * A trace under one of its names, newest last in the key: the by-name listing walks it backwards. Deleted with its
 * trace by the trigger on traces (migration Traces), which knows its names.
 */
@Entity({ name: 'trace_names' })
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
