import { Column, Entity, Index, PrimaryColumn, Unique } from 'typeorm';

@Entity({ name: 'queues' })
@Unique('uq_queues_name', ['tenantId', 'name'])
@Index('idx_queues_retention_recheck', ['tenantId', 'id'], { where: 'retention_recheck_from IS NOT NULL' })
@Index('idx_queues_encrypted', ['tenantId'], { where: 'encryption_enabled' })
export class QueueEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid', primaryKeyConstraintName: 'pk_queues' })
  tenantId: string;

  @PrimaryColumn({ name: 'id', type: 'uuid', primaryKeyConstraintName: 'pk_queues' })
  id: string;

  @Column({ name: 'name', type: 'text' })
  name: string;

  @Column({ name: 'lease_time', type: 'integer', default: 60 })
  leaseTime: number;

  @Column({ name: 'retry_limit', type: 'integer', default: 3 })
  retryLimit: number;

  @Column({ name: 'dead_letter_queue', type: 'boolean', default: true })
  deadLetterQueue: boolean;

  @Column({ name: 'options', type: 'jsonb', default: () => "'{}'" })
  options: Record<string, unknown>;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;

  /** Retention settings (see RetentionService); null means the broker's default. */
  @Column({ name: 'retention_enabled', type: 'boolean', nullable: true })
  retentionEnabled: boolean | null;

  @Column({ name: 'retention_seconds', type: 'integer', nullable: true })
  retentionSeconds: number | null;

  @Column({ name: 'completed_retention_seconds', type: 'integer', nullable: true })
  completedRetentionSeconds: number | null;

  @Column({ name: 'max_wait_time_seconds', type: 'integer', nullable: true })
  maxWaitTimeSeconds: number | null;

  @Column({ name: 'max_size', type: 'integer', nullable: true })
  maxSize: number | null;

  @Column({ name: 'dlq_retention_seconds', type: 'integer', nullable: true })
  dlqRetentionSeconds: number | null;

  /** Seconds a message may go unconsumed (Queen's ttl); evicted as maxWaitTimeSeconds evicts. */
  @Column({ name: 'ttl_seconds', type: 'integer', nullable: true })
  ttlSeconds: number | null;

  /** Dead letters are kept when this or deadLetterQueue is on: Queen documents the two as alternatives. */
  @Column({ name: 'dlq_after_max_retries', type: 'boolean', default: false })
  dlqAfterMaxRetries: boolean;

  /** Milliseconds after a nack or an expired lease before the partition is offered to that group again. */
  @Column({ name: 'retry_delay_ms', type: 'integer', default: 0 })
  retryDelayMs: number;

  /** Seconds after its push before a message can be popped. */
  @Column({ name: 'delayed_processing', type: 'integer', default: 0 })
  delayedProcessing: number;

  /** Seconds a partition must be quiet (its newest message that old) before it is handed out. */
  @Column({ name: 'window_buffer', type: 'integer', default: 0 })
  windowBuffer: number;

  /** What a discovery pop (GET /api/v1/pop?namespace=&task=) matches queues by. */
  @Column({ name: 'namespace', type: 'text', nullable: true })
  namespace: string | null;

  @Column({ name: 'task', type: 'text', nullable: true })
  task: string | null;

  /** Order of the queues a discovery pop serves, highest first. */
  @Column({ name: 'priority', type: 'integer', default: 0 })
  priority: number;

  /**
   * After its retention settings changed, the retention job looks at its partitions again, a batch at a time in name
   * order from past this name ('' from the first); null when there is none left to look at.
   */
  @Column({ name: 'retention_recheck_from', type: 'text', nullable: true })
  retentionRecheckFrom: string | null;

  /** New payloads are sealed (docs/operations.md); stored ones keep whatever they were written as. */
  @Column({ name: 'encryption_enabled', type: 'boolean', default: false })
  encryptionEnabled: boolean;
}
