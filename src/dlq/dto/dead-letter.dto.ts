import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const TIMESTAMP = '2026-07-30T11:06:44.512873Z';

export class DeadLetterDto {
  @ApiProperty({ description: 'Id of the dead letter', example: EXAMPLE_ID })
  id: string;

  @ApiProperty({ description: 'Id of the original message', example: EXAMPLE_ID })
  messageId: string;

  @ApiProperty({ example: 'order-42-created' })
  transactionId: string;

  @ApiProperty({ type: String, nullable: true })
  traceId: string | null;

  @ApiProperty({ description: 'The original payload, as it was pushed', example: { orderId: 42 } })
  data: unknown;

  @ApiProperty({ type: String, nullable: true })
  producerSub: string | null;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'The error sent with the last failure',
    example: 'timeout calling billing',
  })
  errorMessage: string | null;

  @ApiProperty({ type: 'integer', description: 'Retries spent before it was dead-lettered' })
  retryCount: number;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({ example: EXAMPLE_ID })
  partitionId: string;

  @ApiProperty({ example: '__QUEUE_MODE__' })
  consumerGroup: string;

  @ApiProperty({ description: 'When the message was pushed', example: TIMESTAMP })
  createdAt: string;

  @ApiProperty({ description: 'When it was dead-lettered', example: TIMESTAMP })
  failedAt: string;

  @ApiPropertyOptional({
    description:
      'Only when the stored payload of an encrypted queue could not be decrypted (its key is not configured, or ' +
      'the stored text was altered): data is then null',
    example: 'payload cannot be decrypted: it does not authenticate under key k1',
  })
  error?: string;
}

export class DeadLetterPageDto {
  @ApiProperty({ type: [DeadLetterDto], description: 'Oldest first' })
  messages: DeadLetterDto[];

  @ApiProperty({ type: 'integer', description: 'All dead letters matching the filters, not just this page' })
  total: number;
}
