import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'messages' })
export class MessageEntity {
  @PrimaryColumn({ name: 'tenant_id', type: 'uuid' })
  tenantId: string;

  @PrimaryColumn({ name: 'partition_id', type: 'uuid' })
  partitionId: string;

  @PrimaryColumn({ name: 'seq', type: 'bigint' })
  seq: string;

  @Column({ name: 'id', type: 'uuid' })
  id: string;

  @Column({ name: 'transaction_id', type: 'text' })
  transactionId: string;

  @Column({ name: 'trace_id', type: 'text', nullable: true })
  traceId: string | null;

  @Column({ name: 'payload', type: 'jsonb', nullable: true })
  payload: unknown;

  @Column({ name: 'payload_bytes', type: 'integer', nullable: true })
  payloadBytes: number | null;

  @Column({ name: 'producer_sub', type: 'text', nullable: true })
  producerSub: string | null;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
