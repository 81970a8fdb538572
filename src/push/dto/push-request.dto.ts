import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsName, IsStoredJson } from '../../common/contract-validators';
import { IgnoresKeys, IsArrayOf } from '../../common/dto-validation';

export const DEFAULT_PARTITION = 'Default';
export const MAX_PUSH_ITEMS = 10_000;

export interface PushItem {
  queue: string;
  partition: string;
  /** The payload as JSON text, measured and checked; stored as it is. */
  payloadJson: string;
  transactionId: string | undefined;
  traceId: string | undefined;
}

/** Queen's server takes a payload as `data` too; here it is `payload`, required, and `data` is not read. */
@IgnoresKeys('data')
export class PushItemDto {
  @ApiProperty({ description: 'Queue name (1-255 characters, no control characters); created on first push' })
  @IsName()
  queue: string;

  @ApiPropertyOptional({ description: 'Partition name; created on first push', default: DEFAULT_PARTITION })
  @IsName({ optional: true })
  partition?: string;

  @ApiProperty({
    description:
      'Any JSON value, null included (delivered as data: null). Required. Stored and delivered as sent, without the ' +
      'whitespace outside its strings: keys, numbers and escapes as written. Up to MESSAGE_MAX_BYTES so minified ' +
      '(4 MiB by default) and 100 levels deep; no \\u0000',
    example: { orderId: 42 },
  })
  @IsStoredJson({ maxBytes: 'messageMaxBytes' })
  payload: unknown;

  @ApiPropertyOptional({
    description:
      'Idempotency key per partition: a repeat is reported as duplicate and not stored again. ' +
      'Minted (UUIDv7) when absent.',
    example: 'order-42-created',
  })
  @IsName({ optional: true })
  transactionId?: string;

  @ApiPropertyOptional({ type: String, nullable: true, description: 'Carried to the consumer untouched' })
  @IsName({ optional: true })
  traceId?: string | null;
}

export class PushRequestDto {
  @ApiProperty({
    type: [PushItemDto],
    maxItems: MAX_PUSH_ITEMS,
    description: `Up to ${MAX_PUSH_ITEMS} messages, written in one transaction`,
  })
  @IsArrayOf(() => PushItemDto, { max: MAX_PUSH_ITEMS, noun: 'messages' })
  items: PushItemDto[];
}
