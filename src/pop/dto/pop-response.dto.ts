import { ApiProperty } from '@nestjs/swagger';

const EXAMPLE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';

export class PopMessageDto {
  @ApiProperty({ description: 'Message id (UUIDv7)', example: EXAMPLE_ID })
  id: string;

  @ApiProperty({ example: 'order-42-created' })
  transactionId: string;

  @ApiProperty({ type: String, nullable: true, example: 'trace-7f3a' })
  traceId: string | null;

  @ApiProperty({ description: 'The pushed payload, null included', example: { orderId: 42 } })
  data: unknown;

  @ApiProperty({ type: String, nullable: true, description: "The pushing token's subject; null when auth is off" })
  producerSub: string | null;

  @ApiProperty({ example: '2026-07-30T11:06:44.512873Z' })
  createdAt: string;

  @ApiProperty({ example: EXAMPLE_ID })
  partitionId: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'The lease of this pop; null with autoAck',
    example: EXAMPLE_ID,
  })
  leaseId: string | null;

  @ApiProperty({ example: '__QUEUE_MODE__' })
  consumerGroup: string;

  @ApiProperty({
    type: 'integer',
    description:
      '1 on first delivery to this group; one more each time the batch is redelivered after an expired lease ' +
      'or a nack',
    example: 1,
  })
  deliveryAttempt: number;

  @ApiProperty({
    type: 'integer',
    description:
      "The fencing token of this message's claim: how many times its partition has been claimed by this group, " +
      'this claim included. It only grows, and a redelivery carries a higher one. Write it with what the ' +
      'handler stores elsewhere, and refuse a write carrying a lower epoch than the highest seen for the ' +
      'partition: a worker that stalled past its lease can then not overwrite the next holder. An ack may ' +
      'carry it (leaseEpoch).',
    example: 3,
  })
  leaseEpoch: number;
}

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

  @ApiProperty({ type: [PopMessageDto], description: 'In partition claim order, then offset order' })
  messages: PopMessageDto[];

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
