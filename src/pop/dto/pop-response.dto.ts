import { ApiProperty } from '@nestjs/swagger';
import { MessageDto } from '../../messages/message-shape';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

export class ClaimedPartitionDto {
  @ApiProperty({ example: EXAMPLE_ID })
  partitionId: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({
    type: 'integer',
    description: "This claim's fencing token (see the messages' leaseEpoch)",
    example: 3,
  })
  leaseEpoch: number;

  @ApiProperty({
    type: 'integer',
    description: 'How many messages of this answer come from this partition',
    example: 10,
  })
  messages: number;
}

export class PopResponseDto {
  @ApiProperty({ example: true })
  success: boolean;

  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ description: 'The first claimed partition (each message names its own)', example: 'Default' })
  partition: string;

  @ApiProperty({ description: 'Id of the first claimed partition; acks name partitions by id', example: EXAMPLE_ID })
  partitionId: string;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'One lease (UUIDv7) for every partition this pop claimed: extend it, ack with it. null with autoAck.',
    example: EXAMPLE_ID,
  })
  leaseId: string | null;

  @ApiProperty({ example: '__QUEUE_MODE__' })
  consumerGroup: string;

  @ApiProperty({ type: [MessageDto], description: 'In partition claim order, then offset order' })
  messages: MessageDto[];

  @ApiProperty({
    type: 'integer',
    description: 'How many partitions this pop claimed (at most the partitions parameter)',
    example: 1,
  })
  partitionsClaimed: number;

  @ApiProperty({
    type: [ClaimedPartitionDto],
    description: 'Each partition this pop claimed, in the order its messages come, with its fencing token',
  })
  claimedPartitions: ClaimedPartitionDto[];
}
