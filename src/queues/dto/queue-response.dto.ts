import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

const TIMESTAMP = '2026-07-30T11:06:44.512873Z';

export class ConfigureResponseDto {
  @ApiProperty({ example: true })
  configured: true;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Every option that was sent, with the value now in force',
    example: { leaseTime: 30, retryLimit: 5 },
  })
  options: Record<string, unknown>;
}

export class DeleteQueueResponseDto {
  @ApiProperty({ description: 'Whether this call deleted it' })
  deleted: boolean;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ description: 'Whether it existed before this call' })
  existed: boolean;
}

export class QueueSummaryDto {
  @ApiProperty({ example: 'orders' })
  name: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    example: { leaseTime: 60, retryLimit: 3, deadLetterQueue: true },
    description:
      'Any stored options from before they were refused, then leaseTime, retryLimit, deadLetterQueue and each other ' +
      'option once set, with the value in force',
  })
  options: Record<string, unknown>;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Retention in force, the broker defaults included; 0 means none (docs/retention.md)',
    example: {
      completedRetentionSeconds: 3600,
      retentionEnabled: true,
      retentionSeconds: 1209600,
      maxWaitTimeSeconds: 0,
      maxSize: 0,
      dlqRetentionSeconds: 1209600,
      ttl: 0,
    },
  })
  retention: Record<string, number | boolean>;

  @ApiProperty({ type: String, nullable: true, example: 'billing', description: 'Set by configure' })
  namespace: string | null;

  @ApiProperty({ type: String, nullable: true, example: 'invoices', description: 'Set by configure' })
  task: string | null;

  @ApiProperty({ type: 'integer' })
  partitionCount: number;

  @ApiProperty({ type: 'integer', description: 'Messages ever stored (the sum of partition offsets)' })
  messages: number;

  @ApiProperty({
    type: 'integer',
    description: "Messages not yet consumed by the queue's slowest consumer group (every kept one when it has none)",
  })
  pending: number;

  @ApiProperty({ type: 'integer', description: 'Messages still stored; retention deletes the others' })
  retained: number;

  @ApiProperty({ type: 'integer' })
  deadLetters: number;

  @ApiProperty({ type: 'integer' })
  consumerGroupCount: number;

  @ApiProperty({ example: TIMESTAMP })
  createdAt: string;

  @ApiProperty({ example: TIMESTAMP })
  updatedAt: string;
}

export class QueueListDto {
  @ApiProperty({ type: [QueueSummaryDto] })
  queues: QueueSummaryDto[];

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Pass as `after` for the queues that did not fit; null when this answer has them all',
  })
  next: string | null;

  @ApiProperty({
    description:
      "Seconds since the tenant's oldest retention work that is not done became due: its partition whose next " +
      'retention look is the longest overdue (0: none). Steadily above RETENTION_INTERVAL_MS, the job is behind.',
    example: 0,
  })
  retentionLagSeconds: number;
}

export class PartitionStatsDto {
  @ApiProperty()
  id: string;

  @ApiProperty({ example: 'Default' })
  name: string;

  @ApiProperty({ type: 'integer', description: 'Messages ever stored: the last offset' })
  messages: number;

  @ApiProperty({ example: TIMESTAMP })
  createdAt: string;
}

export class ConsumerPartitionDto {
  @ApiProperty()
  partitionId: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({ type: 'integer', description: 'Offset of the last committed message' })
  committedOffset: number;

  @ApiProperty({ type: 'integer', description: 'Messages past the cursor' })
  lag: number;

  @ApiProperty({ description: 'A lease is live on this partition for this group' })
  leased: boolean;

  @ApiProperty({ type: String, nullable: true, example: TIMESTAMP })
  leaseExpiresAt: string | null;

  @ApiProperty({ type: 'integer' })
  retryCount: number;

  @ApiProperty({ type: 'integer' })
  deliveryAttempt: number;
}

export class ConsumerGroupDto {
  @ApiProperty({ example: '__QUEUE_MODE__' })
  name: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    description: 'Starting point fixed at the first pop; null = from the beginning',
  })
  subscriptionFrom: string | null;

  @ApiProperty({ type: 'integer', description: 'Messages past the cursor, all partitions' })
  lag: number;

  @ApiProperty({ type: 'integer', description: 'Partitions with a live lease' })
  liveLeases: number;

  @ApiProperty({ type: [ConsumerPartitionDto], description: "The group's cursors in the partitions listed" })
  partitions: ConsumerPartitionDto[];
}

export class QueueDetailDto extends QueueSummaryDto {
  @ApiProperty({
    type: [PartitionStatsDto],
    description: 'A page of partitions by name: the first `limit` (default and most 1000) after `after`',
  })
  partitions: PartitionStatsDto[];

  @ApiProperty({
    description:
      "The queue has partitions this page does not list (partitionCount has them all; each group's lag and " +
      'liveLeases cover them all)',
  })
  partitionsTruncated: boolean;

  @ApiProperty({
    type: String,
    nullable: true,
    example: null,
    description: 'The partition name to pass as after for the next page; null on the last page',
  })
  partitionsNext: string | null;

  @ApiProperty({ type: [ConsumerGroupDto] })
  consumerGroups: ConsumerGroupDto[];
}

export class QueueGroupMessagesDto {
  @ApiProperty({ type: 'integer', description: 'Ever stored' })
  total: number;

  @ApiProperty({ type: 'integer', description: 'Not yet consumed by the slowest group of each queue' })
  pending: number;
}

export class QueueGroupDto {
  @ApiProperty({ example: 'billing', description: 'The namespace or task' })
  name: string;

  @ApiProperty({ type: 'integer' })
  queues: number;

  @ApiProperty({ type: 'integer' })
  partitions: number;

  @ApiProperty({ type: QueueGroupMessagesDto })
  messages: QueueGroupMessagesDto;
}

export class NamespacesDto {
  @ApiProperty({ type: [QueueGroupDto], description: 'By name; queues without a namespace are left out' })
  namespaces: QueueGroupDto[];
}

export class TasksDto {
  @ApiProperty({ type: [QueueGroupDto], description: 'By name; queues without a task are left out' })
  tasks: QueueGroupDto[];
}
