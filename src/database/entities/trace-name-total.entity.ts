import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** One trace name of a tenant with its counts, so the names listing reads one row per name. */
@Entity({ name: 'trace_name_totals' })
@Index('idx_trace_name_totals_seen', ['tenantId', 'lastSeen', 'name'])
export class TraceNameTotalEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_trace_name_totals' })
  tenantId: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_trace_name_totals' })
  name: string;

  @Column({ name: 'trace_count', type: 'bigint' })
  traceCount: string;

  @Column({ name: 'message_count', type: 'bigint' })
  messageCount: string;

  @Column({ name: 'last_seen', type: 'timestamptz' })
  lastSeen: Date;
}
