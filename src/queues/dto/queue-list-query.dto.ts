import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsName, ToQueryInteger } from '../../common/contract-validators';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export const QUEUE_LIST_MAX = 1_000;
export const DETAIL_MAX_PARTITIONS = 1_000;
/** Each listed partition carries every group's position in it: a page of 1,000 with 10 groups was 1.9 MB. */
export const DETAIL_DEFAULT_PARTITIONS = 100;

export class QueueListQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only queues whose name sorts after this' })
  @IsName({ optional: true, inQuery: true })
  after?: string;

  @IntegerParameter(1, QUEUE_LIST_MAX, {
    default: QUEUE_LIST_MAX,
    description: 'Most queues',
  })
  @ToQueryInteger()
  limit = QUEUE_LIST_MAX;
}

export class QueueDetailQueryDto {
  @ApiPropertyOptional({
    type: String,
    description: "Only partitions whose name sorts after this (the previous page's partitionsNext)",
  })
  @IsName({ optional: true, inQuery: true })
  after?: string;

  @IntegerParameter(1, DETAIL_MAX_PARTITIONS, {
    default: DETAIL_DEFAULT_PARTITIONS,
    description: "Most partitions listed, each with every group's position in it",
  })
  @ToQueryInteger()
  limit = DETAIL_DEFAULT_PARTITIONS;
}
