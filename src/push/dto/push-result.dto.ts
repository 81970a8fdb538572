import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export type PushStatus = 'queued' | 'duplicate' | 'failed';

export class PushResultDto {
  @ApiProperty({ type: 'integer', description: 'Position of the item in the request', example: 0 })
  index: number;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Id of the stored message; for a duplicate, the id of the original; null when it failed',
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
  })
  message_id: string | null;

  @ApiProperty({ example: 'order-42-created' })
  transaction_id: string;

  @ApiProperty({ example: 'orders' })
  queueName: string;

  @ApiProperty({
    enum: ['queued', 'duplicate', 'failed'],
    description:
      'queued: stored now; duplicate: this transactionId was already in the partition; failed: not stored ' +
      '(`error` says why: `queue is full` when the queue holds maxSize messages not yet consumed). A push is ' +
      'otherwise validated whole and written in one transaction.',
  })
  status: PushStatus;

  @ApiPropertyOptional({ description: 'Why the item failed; only on failed items', example: 'queue is full' })
  error?: string;
}
