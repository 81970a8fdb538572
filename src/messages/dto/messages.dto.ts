import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, IsName, ToQueryInteger, zonedTimestamp } from '../../common/contract-validators';
import { MessageDto } from '../../message/message-shape';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export const MESSAGE_STATUSES = ['pending', 'leased', 'completed', 'dead_letter'] as const;
const TIMESTAMP = '2026-07-30T11:06:44.512873Z';

const IsQueryTimestamp = () =>
  contractRule('isQueryTimestamp', (value) =>
    value === undefined || zonedTimestamp(value) !== undefined ? undefined : 'must be an ISO-8601 timestamp',
  );

export class MessageListQueryDto {
  @ApiProperty({ type: String, description: 'The queue to browse' })
  @IsName({ inQuery: true })
  queue: string;

  @ApiPropertyOptional({ type: String, description: 'Only this partition' })
  @IsName({ optional: true, inQuery: true })
  partition?: string;

  @ApiPropertyOptional({
    type: String,
    default: '__QUEUE_MODE__',
    description: 'The group whose view status shows',
  })
  @IsName({ optional: true, inQuery: true })
  consumerGroup?: string;

  @ApiPropertyOptional({ enum: MESSAGE_STATUSES, description: 'Only messages in this state for the group' })
  @contractRule('isStatus', (value) =>
    value === undefined || (MESSAGE_STATUSES as readonly unknown[]).includes(value)
      ? undefined
      : `must be one of ${MESSAGE_STATUSES.join(', ')}`,
  )
  status?: (typeof MESSAGE_STATUSES)[number];

  @ApiPropertyOptional({ type: String, example: '2026-07-30T10:00:00Z', description: 'Created at or after' })
  @IsQueryTimestamp()
  from?: string;

  @ApiPropertyOptional({ type: String, example: '2026-07-30T11:00:00Z', description: 'Created before' })
  @IsQueryTimestamp()
  to?: string;

  @IntegerParameter(1, 1_000, { default: 100, description: 'Page size' })
  @ToQueryInteger()
  limit = 100;

  @ApiPropertyOptional({ type: String, description: 'The next of the previous page' })
  @contractRule('isCursor', (value) =>
    value === undefined || (typeof value === 'string' && value.length <= 512) ? undefined : 'is not a page cursor',
  )
  after?: string;
}

export class ConsumerGroupQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only this consumer group' })
  @IsName({ optional: true, inQuery: true })
  consumerGroup?: string;
}

export class ClearQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only this partition' })
  @IsName({ optional: true, inQuery: true })
  partition?: string;
}

export class ListedMessageDto extends MessageDto {
  @ApiProperty({ enum: MESSAGE_STATUSES, description: 'For consumerGroup: dead_letter, completed, leased or pending' })
  status: string;
}

export class MessagePageDto {
  @ApiProperty({ type: [ListedMessageDto], description: 'Newest first' })
  messages: ListedMessageDto[];

  @ApiProperty({ type: String, nullable: true, description: 'Pass as after for the next page; null at the end' })
  next: string | null;
}

export class MessageGroupStateDto {
  @ApiProperty({ example: 'billing' })
  consumerGroup: string;

  @ApiProperty({ enum: MESSAGE_STATUSES })
  status: string;

  @ApiProperty({ type: 'integer', description: 'Deliveries of its batch so far, while leased; else 0' })
  deliveryAttempt: number;

  @ApiProperty({ description: 'Whether the group holds a live lease on its partition (the id is never shown)' })
  leaseActive: boolean;

  @ApiProperty({ type: String, nullable: true, example: TIMESTAMP })
  leaseExpiresAt: string | null;

  @ApiProperty({ type: 'integer' })
  leaseEpoch: number;
}

export class MessageDeadLetterDto {
  @ApiProperty({ example: 'billing' })
  consumerGroup: string;

  @ApiProperty({ type: String, nullable: true, example: 'timeout calling billing' })
  errorMessage: string | null;

  @ApiProperty({ type: 'integer' })
  retryCount: number;

  @ApiProperty({ example: TIMESTAMP })
  failedAt: string;
}

export class MessageDetailDto {
  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  partitionId: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91' })
  id: string;

  @ApiProperty({ example: 'order-42-created' })
  transactionId: string;

  @ApiProperty({ type: String, nullable: true })
  traceId: string | null;

  @ApiProperty({ description: 'The payload, as pushed', example: { orderId: 42 } })
  data: unknown;

  @ApiProperty({ type: String, nullable: true })
  producerSub: string | null;

  @ApiProperty({ example: TIMESTAMP })
  createdAt: string;

  @ApiProperty({ type: [MessageGroupStateDto], description: 'Its state in every consumer group of the queue' })
  groups: MessageGroupStateDto[];

  @ApiProperty({ type: [MessageDeadLetterDto] })
  deadLetters: MessageDeadLetterDto[];
}

export class DeleteMessageResponseDto {
  @ApiProperty({ example: true })
  deleted: true;

  @ApiProperty({ description: 'Whether the message itself was still stored' })
  message: boolean;

  @ApiProperty({ type: 'integer', description: 'Its dead letters removed with it' })
  deadLetters: number;
}

export class RetryMessageResponseDto {
  @ApiProperty({ example: true })
  retried: true;

  @ApiProperty({ description: 'The new message', example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92' })
  messageId: string;

  @ApiProperty({ example: 'dlq:order-42-created' })
  transactionId: string;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({ type: 'integer', description: 'Dead letters removed' })
  deadLetters: number;
}

export class ClearQueueResponseDto {
  @ApiProperty({ example: true })
  cleared: true;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiPropertyOptional({ example: 'Default' })
  partition?: string;

  @ApiProperty({ type: 'integer' })
  messagesDeleted: number;

  @ApiProperty({ type: 'integer', description: 'Partitions whose cursors moved to the end' })
  partitions: number;
}

export class MoveToDeadLettersResponseDto {
  @ApiProperty({ example: true })
  moved: true;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a93' })
  deadLetterId: string;

  @ApiProperty({ example: '__QUEUE_MODE__' })
  consumerGroup: string;
}
