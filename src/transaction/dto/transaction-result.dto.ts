import { ApiExtraModels, ApiProperty, ApiPropertyOptional, getSchemaPath } from '@nestjs/swagger';
import { AckResultDto } from '../../ack/dto/ack-result.dto';
import { PushResultDto } from '../../push/dto/push-result.dto';

export const TRANSACTION_FAILURE_REASONS = [
  'bad_request',
  'ack_rejected',
  'lease_lost',
  'duplicate',
  'payload_too_large',
  'db_error',
] as const;

export type TransactionFailureReason = (typeof TRANSACTION_FAILURE_REASONS)[number];

export class TransactionPushResultDto {
  @ApiProperty({ type: 'integer', description: 'Position of the operation in the request', example: 1 })
  index: number;

  @ApiProperty({ enum: ['push'] })
  type: 'push';

  @ApiProperty({ description: 'Always true in a committed transaction' })
  success: boolean;

  @ApiProperty({ type: [PushResultDto], description: "One answer per item, as /push answers; index is the item's" })
  items: PushResultDto[];
}

export class TransactionAckResultDto extends AckResultDto {
  @ApiProperty({ enum: ['ack'] })
  type: 'ack';
}

export type TransactionOperationResult = TransactionPushResultDto | TransactionAckResultDto;

@ApiExtraModels(TransactionPushResultDto, TransactionAckResultDto)
export class TransactionResultDto {
  @ApiProperty({ description: 'Minted for this call (UUIDv7), to find it in logs', format: 'uuid' })
  transactionId: string;

  @ApiProperty({ description: 'true: every operation applied and committed; false: nothing did' })
  success: boolean;

  @ApiPropertyOptional({
    enum: TRANSACTION_FAILURE_REASONS,
    description:
      'Only when success is false. bad_request: an operation is malformed or cannot apply (unknown type, a ' +
      'queue at maxSize); payload_too_large: a payload is above MESSAGE_MAX_BYTES; ack_rejected: an ack does ' +
      'not apply (unknown partition or message, not delivered, already acknowledged); lease_lost: a lease is ' +
      "expired, released, re-claimed (stale leaseEpoch) or not the caller's; duplicate: the transaction was " +
      'already applied (every push item a duplicate, every ack already acknowledged); db_error: the database ' +
      'refused it (a deadlock, say), and it may be retried as it is.',
  })
  reason?: string;

  @ApiPropertyOptional({
    description: 'Only when success is false: the operation (or required lease) at fault and why',
    example: 'operations[2]: invalid or expired lease',
  })
  error?: string;

  @ApiProperty({
    type: 'array',
    items: {
      oneOf: [{ $ref: getSchemaPath(TransactionPushResultDto) }, { $ref: getSchemaPath(TransactionAckResultDto) }],
    },
    description: 'One entry per operation, in request order; empty when success is false',
  })
  results: TransactionOperationResult[];
}
