import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** One message to push, as validated by PushRequestPipe. */
export interface PushItem {
  queue: string;
  partition: string;
  /** The payload as JSON text, measured and checked; stored as it is. */
  payloadJson: string;
  transactionId: string | undefined;
  traceId: string | undefined;
}

export class PushItemDto {
  @ApiProperty({ description: 'Queue name (1-255 characters, no control characters); created on first push' })
  queue: string;

  @ApiPropertyOptional({ description: 'Partition name; created on first push', default: 'Default' })
  partition?: string;

  @ApiProperty({
    description:
      'Any JSON value, null included (delivered as data: null). Required. Up to MESSAGE_MAX_BYTES as JSON (1 MiB by ' +
      'default) and 100 levels deep; no \\u0000',
    example: { orderId: 42 },
  })
  payload: unknown;

  @ApiPropertyOptional({
    description:
      'Idempotency key per partition: a repeat is reported as duplicate and not stored again. ' +
      'Minted (UUIDv7) when absent.',
    example: 'order-42-created',
  })
  transactionId?: string;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'Carried to the consumer untouched' })
  traceId?: string | null;
}

export class PushRequestDto {
  @ApiProperty({ type: [PushItemDto], description: 'Up to 10000 messages, written in one transaction' })
  items: PushItemDto[];
}
