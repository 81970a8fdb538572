import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export type AckOutcome = 'completed' | 'retry' | 'dlq' | 'failed';

/** One acknowledgment, as validated by the ack pipes. */
export interface AckCommand {
  transactionId: string;
  partitionId: string;
  outcome: AckOutcome;
  consumerGroup: string;
  leaseId: string | undefined;
  leaseEpoch?: number | undefined;
  error: string | null;
}

export class AckRequestDto {
  @ApiProperty({ description: 'transactionId of the message being acknowledged', example: 'order-42-created' })
  transactionId: string;

  @ApiProperty({ description: 'partitionId from the pop', example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  partitionId: string;

  @ApiPropertyOptional({
    description:
      'completed (also absent, success, acked, ok) commits the cursor up to this message; retry hands the batch ' +
      'back for redelivery without spending a retry; dlq dead-letters the message now; anything else (failed, ' +
      'nack, ...) is a failure: the lease is released, the batch redelivers and one retry is spent (retryLimit, ' +
      'then the dead-letter queue).',
    example: 'completed',
  })
  status?: string;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'Absent or null: queue mode (__QUEUE_MODE__)' })
  consumerGroup?: string | null;

  @ApiPropertyOptional({
    description:
      'The leaseId from the pop. With it, only the live holder may ack; without it there is no lease check, ' +
      "which can move the cursor under another worker's live lease.",
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
  })
  leaseId?: string;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    description:
      'The leaseEpoch of this message from the pop: the fencing token of its claim. With it the ack is refused ' +
      "(invalid or expired lease) unless the partition's latest claim for this group is that one, whatever " +
      'leaseId says.',
    example: 3,
  })
  leaseEpoch?: number;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'Why it failed; kept with a dead letter (first 10000 characters)',
  })
  error?: string | null;
}

export class AckBatchRequestDto {
  @ApiPropertyOptional({ type: String, nullable: true, description: 'Default group for items that name none' })
  consumerGroup?: string | null;

  @ApiProperty({
    type: [AckRequestDto],
    description: 'Up to 10000 acknowledgments, applied in order in one transaction',
  })
  acknowledgments: AckRequestDto[];
}
