import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  contractRule,
  IsName,
  IsOptionalText,
  IsTrueOrFalse,
  IsUuidText,
  UNPAIRED_SURROGATE,
} from '../../common/contract-validators';
import { AcceptsKey, IsArrayOf, IsObjectOf } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';
import { QUEUE_MODE_GROUP } from '../../common/queue-mode';
import { MAX_PUSH_ITEMS, PushItemDto } from '../../push/dto/push-request.dto';
import { PushResultDto } from '../../push/dto/push-result.dto';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export const MAX_STATE_OPS = 10_000;
export const STATE_KEY_MAX_LENGTH = 1_024;

/** Any text but NUL, which PostgreSQL cannot store: the SDK's keys join their parts with U+001F. */
export function stateKeyProblem(value: unknown): string | undefined {
  if (value === undefined || value === null) return 'is required';
  if (typeof value !== 'string') return 'must be a string';
  if (value.length === 0 || value.length > STATE_KEY_MAX_LENGTH) {
    return `must be 1 to ${STATE_KEY_MAX_LENGTH} characters long`;
  }
  if (value.includes('\u0000')) return 'must not contain the character \\u0000';
  if (UNPAIRED_SURROGATE.test(value)) return 'must not contain an unpaired UTF-16 surrogate';
  return undefined;
}

const IsStateOpType = () =>
  contractRule('isStateOpType', (value) =>
    value === 'upsert' || value === 'delete' ? undefined : 'must be upsert or delete',
  );

const IsStateKey = () => contractRule('isStateKey', stateKeyProblem);

export class StateOpDto {
  @ApiProperty({ enum: ['upsert', 'delete'] })
  @IsStateOpType()
  type: 'upsert' | 'delete';

  @ApiProperty({ example: 'tumb:60\u001fcustomer-7\u001f2026-12-06T01:00:00.000Z', maxLength: STATE_KEY_MAX_LENGTH })
  @IsStateKey()
  key: string;

  @ApiPropertyOptional({
    description:
      'For an upsert: any JSON value, up to MESSAGE_MAX_BYTES and 100 levels deep, no \\u0000 ({} when absent). ' +
      'Not read for a delete',
    example: { acc: 42, windowStart: 1796518800000, windowEnd: 1796518860000 },
  })
  @AcceptsKey()
  value?: unknown;
}

export class CycleAckDto {
  @ApiProperty({ example: 'order-42-created', description: 'The last source message the cycle consumed' })
  @IsName()
  transactionId: string;

  @ApiPropertyOptional({
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91',
    description: 'The lease of the pop that delivered it: the cycle commits only while it is live',
  })
  @IsUuidText({ optional: true })
  leaseId?: string | null;

  @IntegerParameter(1, Number.MAX_SAFE_INTEGER, {
    description:
      'The claim the lease came from (leaseEpoch of the pop): a later claim of the partition refuses the cycle',
    nullMeansAbsent: true,
  })
  leaseEpoch?: number | null;

  @ApiPropertyOptional({ default: 'completed', description: 'As on POST /api/v1/ack: completed, failed, retry or dlq' })
  @IsOptionalText()
  status?: string | null;

  @IntegerParameter(0, INT32_MAX, {
    description: 'Messages the cycle consumed, as the SDK counts them',
    nullMeansAbsent: true,
  })
  count?: number | null;

  @ApiPropertyOptional({ description: 'Why it failed, kept with a dead letter' })
  @IsOptionalText()
  error?: string | null;
}

export class CycleRequestDto {
  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90', description: 'query_id from registration' })
  @IsUuidText()
  query_id: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92', description: 'The source partition' })
  @IsUuidText()
  partition_id: string;

  @ApiPropertyOptional({ type: String, nullable: true, default: QUEUE_MODE_GROUP, example: 'streams.orders' })
  @IsName({ optional: true })
  consumer_group?: string | null;

  @ApiPropertyOptional({
    type: [StateOpDto],
    maxItems: MAX_STATE_OPS,
    description: 'Applied in order, scoped to the query and the source partition',
  })
  @IsArrayOf(() => StateOpDto, { max: MAX_STATE_OPS, noun: 'state operations', optional: true })
  state_ops?: StateOpDto[] | null;

  @ApiPropertyOptional({
    type: [PushItemDto],
    maxItems: MAX_PUSH_ITEMS,
    description: "Pushed as POST /api/v1/push's items, in order",
  })
  @IsArrayOf(() => PushItemDto, { max: MAX_PUSH_ITEMS, noun: 'push items', optional: true })
  push_items?: PushItemDto[] | null;

  @ApiPropertyOptional({ type: CycleAckDto, nullable: true, description: 'The source ack; null for a flush' })
  @IsObjectOf(() => CycleAckDto)
  ack?: CycleAckDto | null;

  @ApiPropertyOptional({
    default: true,
    description:
      "true ends the source lease on the ack's partition, as acking the whole batch would; false moves the " +
      'cursor but keeps the lease, so the rest of the batch comes back, in order, when the lease ends',
  })
  @IsTrueOrFalse({ nullMeansAbsent: true })
  release_lease?: boolean | null;
}

export class CycleAckResultDto {
  @ApiProperty()
  success: boolean;

  @ApiProperty({ type: 'integer' })
  count: number;

  @ApiProperty()
  lease_released: boolean;

  @ApiProperty()
  dlq: boolean;
}

export class CycleResponseDto {
  @ApiProperty({ example: true })
  success: boolean;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  query_id: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92' })
  partition_id: string;

  @ApiProperty({ type: 'integer', example: 2 })
  state_ops_applied: number;

  @ApiProperty({ type: [PushResultDto] })
  push_results: PushResultDto[];

  @ApiProperty({ type: CycleAckResultDto, nullable: true })
  ack_result: CycleAckResultDto | null;
}

export class CycleRefusalDto {
  @ApiProperty({ example: false })
  success: false;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  query_id: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92' })
  partition_id: string;

  @ApiProperty({
    enum: ['lease_lost', 'ack_rejected', 'queue_full', 'db_error'],
    description:
      'lease_lost: the lease is not live or a later claim fenced it; ack_rejected: the ack did not apply (the ' +
      'error says why); queue_full: a push item did not fit its queue; db_error: the database rolled it back',
  })
  reason: string;

  @ApiProperty({ example: 'ack: invalid or expired lease' })
  error: string;
}
