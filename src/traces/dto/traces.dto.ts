import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, ToQueryInteger } from '../../common/contract-validators';
import { INT32_MAX } from '../../common/input';
import { MessageTraceDto, NamedTraceDto } from '../trace-shape';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export class TracesByNameQueryDto {
  @IntegerParameter(1, 1_000, { default: 100, description: 'Page size' })
  @ToQueryInteger()
  limit = 100;

  @IntegerParameter(0, INT32_MAX, {
    default: 0,
    description: 'Traces to skip (Queen paging); each skipped one is still read: prefer after for deep pages',
  })
  @ToQueryInteger()
  offset = 0;

  @ApiPropertyOptional({
    type: String,
    description: 'pagination.next of the previous page: the page after it, however deep (offset then counts from it)',
  })
  @contractRule('isCursor', (value) =>
    value === undefined || (typeof value === 'string' && value.length <= 512) ? undefined : 'is not a page cursor',
  )
  after?: string;
}

export class TraceNamesQueryDto {
  @IntegerParameter(1, 1_000, { default: 50, description: 'Page size' })
  @ToQueryInteger()
  limit = 50;

  @IntegerParameter(0, INT32_MAX, { default: 0, description: 'Names to skip' })
  @ToQueryInteger()
  offset = 0;
}

export class PaginationDto {
  @ApiProperty({ type: 'integer', example: 100 })
  limit: number;

  @ApiProperty({ type: 'integer', example: 0 })
  offset: number;
}

export class TracePaginationDto extends PaginationDto {
  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Pass as after for the next page (with offset 0); null when this page reached the end',
  })
  next: string | null;
}

export class MessageTracesDto {
  @ApiProperty({ type: [MessageTraceDto], description: 'Oldest first; empty when the message has none or is unknown' })
  traces: MessageTraceDto[];
}

export class TracesByNameDto {
  @ApiProperty({
    type: [NamedTraceDto],
    description: 'Newest first; fewer than limit when the page would pass RESPONSE_MAX_BYTES (page on with next)',
  })
  traces: NamedTraceDto[];

  @ApiProperty({ type: 'integer', description: 'Traces of the tenant under this name', example: 3 })
  total: number;

  @ApiProperty({ type: TracePaginationDto })
  pagination: TracePaginationDto;
}

export class TraceNameDto {
  @ApiProperty({ example: 'order-42' })
  trace_name: string;

  @ApiProperty({ type: 'integer', example: 3 })
  trace_count: number;

  @ApiProperty({ type: 'integer', description: 'Messages traced under it', example: 1 })
  message_count: number;

  @ApiProperty({ description: 'Its newest trace', example: '2026-07-30T11:06:44.512873Z' })
  last_seen: string;
}

export class TraceNamesDto {
  @ApiProperty({ type: [TraceNameDto], description: 'Most recently seen first' })
  trace_names: TraceNameDto[];

  @ApiProperty({ type: 'integer', description: 'Trace names of the tenant', example: 1 })
  total: number;

  @ApiProperty({ type: PaginationDto })
  pagination: PaginationDto;
}
