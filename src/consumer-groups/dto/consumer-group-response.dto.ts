import { ApiExtraModels, ApiProperty, ApiPropertyOptional, getSchemaPath } from '@nestjs/swagger';

const TIMESTAMP = '2026-07-30T11:06:44.512873Z';
const PARTITION_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

export type GroupState = 'Lagging' | 'Stable';
export type SubscriptionMode = 'all' | 'new';

export class ConsumerGroupSummaryDto {
  @ApiProperty({ example: 'billing' })
  name: string;

  @ApiProperty({ example: 'orders' })
  queueName: string;

  @ApiProperty({ type: 'integer', description: "Partitions of the queue (the group's position covers every one)" })
  partitions: number;

  @ApiProperty({ type: 'integer', description: 'Partitions where the group has messages left to consume' })
  partitionsWithLag: number;

  @ApiProperty({ type: 'integer', example: 1250, description: 'Messages stored that the group has not consumed' })
  totalLag: number;

  @ApiProperty({
    type: 'integer',
    example: 95,
    description: 'Seconds: age of the oldest message the group has not consumed (0 when caught up)',
  })
  maxTimeLag: number;

  @ApiProperty({ type: 'integer', description: 'Leases of the group live now' })
  liveLeases: number;

  @ApiProperty({ enum: ['all', 'new'], description: 'Where the group started: everything stored, or what came after' })
  subscriptionMode: SubscriptionMode;

  @ApiProperty({ type: String, nullable: true, example: null, description: 'The instant a `new` group started from' })
  subscriptionTimestamp: string | null;

  @ApiProperty({ example: TIMESTAMP, description: 'When the group first popped from the queue (or was sought)' })
  createdAt: string;

  @ApiProperty({
    enum: ['Lagging', 'Stable'],
    description: 'Lagging when its oldest unconsumed message is at least 60 seconds old',
  })
  state: GroupState;
}

export class GroupPartitionDto {
  @ApiProperty({ example: 'customer-42' })
  partition: string;

  @ApiProperty({ example: PARTITION_ID })
  partitionId: string;

  @ApiProperty({ type: 'integer', example: 1200, description: 'Offset of the last message the group consumed here' })
  cursor: number;

  @ApiProperty({ type: 'integer', example: 50, description: 'Messages stored past the cursor' })
  offsetLag: number;

  @ApiProperty({ type: 'integer', example: 95, description: 'Seconds since the oldest of them was pushed' })
  timeLagSeconds: number;

  @ApiProperty({ type: String, nullable: true, example: TIMESTAMP })
  oldestUnconsumedAt: string | null;

  @ApiProperty({ description: 'Whether a lease of the group is live here (its id is never shown)' })
  leaseActive: boolean;

  @ApiProperty({ type: String, nullable: true, example: TIMESTAMP, description: 'Until when, if live' })
  leaseExpiresAt: string | null;

  @ApiProperty({ type: 'integer', description: 'How many times the current batch has been delivered' })
  deliveryAttempt: number;

  @ApiProperty({ type: 'integer', description: 'Failures spent on the message at the cursor' })
  retryCount: number;
}

export class LaggingPartitionDto extends GroupPartitionDto {
  @ApiProperty({ example: 'billing' })
  consumerGroup: string;

  @ApiProperty({ example: 'orders' })
  queueName: string;
}

export class GroupQueueDto {
  @ApiProperty({ enum: ['all', 'new'] })
  subscriptionMode: SubscriptionMode;

  @ApiProperty({ type: String, nullable: true, example: null })
  subscriptionTimestamp: string | null;

  @ApiProperty({
    type: 'integer',
    description: 'Partitions of the queue; the list may hold fewer (1000 at most in all)',
  })
  partitionCount: number;

  @ApiProperty({ type: [GroupPartitionDto], description: 'By partition name' })
  partitions: GroupPartitionDto[];
}

@ApiExtraModels(GroupQueueDto)
export class ConsumerGroupDetailDto {
  static readonly schema = {
    type: 'object',
    description: "The group's position, keyed by queue name; {} when the group is unknown",
    additionalProperties: { $ref: getSchemaPath(GroupQueueDto) },
    example: {
      orders: {
        subscriptionMode: 'all',
        subscriptionTimestamp: null,
        partitionCount: 1,
        partitions: [
          {
            partition: 'Default',
            partitionId: PARTITION_ID,
            cursor: 1200,
            offsetLag: 50,
            timeLagSeconds: 95,
            oldestUnconsumedAt: TIMESTAMP,
            leaseActive: true,
            leaseExpiresAt: TIMESTAMP,
            deliveryAttempt: 1,
            retryCount: 0,
          },
        ],
      },
    },
  };
}

export type ConsumerGroupDetail = Record<string, GroupQueueDto>;

export class DeleteConsumerGroupResponseDto {
  @ApiProperty({ example: true })
  success: true;

  @ApiProperty({ example: 'billing' })
  consumerGroup: string;

  @ApiPropertyOptional({ example: 'orders', description: 'Only when one queue was named' })
  queueName?: string;

  @ApiProperty({ type: 'integer', description: 'Cursors forgotten (0 for an unknown group)' })
  deletedPartitions: number;
}

export class SeekResponseDto {
  @ApiProperty({ example: true })
  success: true;

  @ApiProperty({ example: 'billing' })
  consumerGroup: string;

  @ApiProperty({ example: 'orders' })
  queueName: string;

  @ApiPropertyOptional({ example: 'customer-42', description: 'Only for a partition seek' })
  partition?: string;

  @ApiProperty({ type: 'integer', description: 'Cursors moved' })
  partitionsUpdated: number;
}
