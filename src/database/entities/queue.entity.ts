import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'queues' })
export class QueueEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid' })
  id: string;

  @Column({ name: 'name', type: 'text' })
  name: string;

  @Column({ name: 'lease_time', type: 'integer' })
  leaseTime: number;

  @Column({ name: 'retry_limit', type: 'integer' })
  retryLimit: number;

  @Column({ name: 'dead_letter_queue', type: 'boolean' })
  deadLetterQueue: boolean;

  @Column({ name: 'options', type: 'jsonb' })
  options: Record<string, unknown>;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
