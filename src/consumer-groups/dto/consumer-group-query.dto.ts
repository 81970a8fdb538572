import { ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, IsName, ToQueryBoolean, ToQueryInteger } from '../../common/contract-validators';
import { INT32_MAX } from '../../common/input';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export const GROUP_LIST_MAX = 1_000;
export const GROUP_DETAIL_MAX_PARTITIONS = 1_000;

const AFTER_DESCRIPTION =
  'The X-Next-After header of the previous page: the answer stays a bare array, and a page that is not the last ' +
  'carries that header';

/** Opaque page tokens: their content is checked where they are read. */
const IsPageToken = () =>
  contractRule('isPageToken', (value) =>
    value === undefined || (typeof value === 'string' && value.length <= 2_048) ? undefined : 'is not a page cursor',
  );

export class ConsumerGroupListQueryDto {
  @ApiPropertyOptional({ type: String, description: "Only this queue's groups" })
  @IsName({ optional: true, inQuery: true })
  queue?: string;

  @IntegerParameter(1, GROUP_LIST_MAX, {
    default: GROUP_LIST_MAX,
    description: 'At most this many (group, queue) entries, by queue then group name',
  })
  @ToQueryInteger()
  limit = GROUP_LIST_MAX;

  @ApiPropertyOptional({ type: String, description: AFTER_DESCRIPTION })
  @IsPageToken()
  after?: string;
}

export class LaggingQueryDto {
  @IntegerParameter(0, INT32_MAX, {
    default: 60,
    description: 'Only partitions whose oldest unconsumed message is at least this many seconds old',
  })
  @ToQueryInteger()
  minLagSeconds = 60;

  @IntegerParameter(1, 1_000, {
    default: 100,
    description: 'At most this many entries, each page worst first',
  })
  @ToQueryInteger()
  limit = 100;

  @ApiPropertyOptional({ type: String, description: AFTER_DESCRIPTION })
  @IsPageToken()
  after?: string;
}

export class ConsumerGroupDetailQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only this queue' })
  @IsName({ optional: true, inQuery: true })
  queue?: string;

  @IntegerParameter(1, GROUP_DETAIL_MAX_PARTITIONS, {
    default: GROUP_DETAIL_MAX_PARTITIONS,
    description: 'At most this many partitions in all, by queue then partition name',
  })
  @ToQueryInteger()
  limit = GROUP_DETAIL_MAX_PARTITIONS;

  @ApiPropertyOptional({ type: String, description: AFTER_DESCRIPTION })
  @IsPageToken()
  after?: string;
}

export class DeleteConsumerGroupQueryDto {
  @ApiPropertyOptional({
    type: 'boolean',
    default: true,
    description: "Sent by Queen's clients. Only true: a deleted group's starting point always goes with its cursors",
  })
  @ToQueryBoolean()
  @contractRule('isDeleteMetadata', (value) =>
    value === undefined || value === true ? undefined : "must be true: a group's starting point is deleted with it",
  )
  deleteMetadata?: true;
}
