import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsName, IsOptionalText, IsUuidText } from '../../common/contract-validators';
import { IsArrayOf } from '../../common/dto-validation';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export const MAX_ACKS = 10_000;
export const ERROR_TEXT_MAX_LENGTH = 10_000;
/** One acknowledgment: an error text of the longest kind, written as JSON escapes, fits. */
export const ACK_BODY_MAX_BYTES = 128 * 1024;

export type AckOutcome = 'completed' | 'retry' | 'dlq' | 'failed';

export interface AckCommand {
  transactionId: string;
  partitionId: string;
  outcome: AckOutcome;
  consumerGroup: string;
  leaseId: string | undefined;
  leaseEpoch?: number | undefined;
  error: string | null;
  /** A completed ack with its leaseId ends that lease mid-batch too (a stream cycle's release_lease). */
  releaseLease?: boolean;
}

export class AckRequestDto {
  @ApiProperty({ description: 'transactionId of the message being acknowledged', example: 'order-42-created' })
  @IsName()
  transactionId: string;

  @ApiProperty({ description: 'partitionId from the pop', example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  @IsUuidText()
  partitionId: string;

  @ApiPropertyOptional({
    description:
      'completed (also absent, success, acked, ok) commits the cursor up to this message; retry hands the batch ' +
      'back for redelivery without spending a retry; dlq dead-letters the message now; anything else (failed, ' +
      'nack, ...) is a failure: the lease is released, the batch redelivers and one retry is spent (retryLimit, ' +
      'then the dead-letter queue).',
    example: 'completed',
  })
  @IsOptionalText()
  status?: string;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'Absent or null: queue mode (__QUEUE_MODE__)' })
  @IsName({ optional: true })
  consumerGroup?: string | null;

  @ApiPropertyOptional({
    description:
      'The leaseId from the pop. With it, only the live holder may ack; without it there is no lease check, ' +
      "which can move the cursor under another worker's live lease.",
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
  })
  @IsUuidText({ optional: true })
  leaseId?: string;

  @IntegerParameter(1, Number.MAX_SAFE_INTEGER, {
    nullable: true,
    description:
      'The leaseEpoch of this message from the pop: the fencing token of its claim. With it the ack is refused ' +
      "(invalid or expired lease) unless the partition's latest claim for this group is that one, whatever " +
      'leaseId says.',
    example: 3,
    nullMeansAbsent: true,
  })
  leaseEpoch?: number | null;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: `Why it failed; kept with a dead letter (first ${ERROR_TEXT_MAX_LENGTH} characters)`,
  })
  @IsOptionalText()
  error?: string | null;
}

export class AckBatchRequestDto {
  @ApiPropertyOptional({ type: String, nullable: true, description: 'Default group for items that name none' })
  @IsName({ optional: true })
  consumerGroup?: string | null;

  @ApiProperty({
    type: [AckRequestDto],
    maxItems: MAX_ACKS,
    description: `Up to ${MAX_ACKS} acknowledgments, applied in order in one transaction`,
  })
  @IsArrayOf(() => AckRequestDto, { max: MAX_ACKS, noun: 'items' })
  acknowledgments: AckRequestDto[];
}
