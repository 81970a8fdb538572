import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsName, ToQueryInteger } from '../../common/contract-validators';
import { IgnoresKeys } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

/** Queen's client sends these filters of its own broker's listing; this one does not filter by them (docs/api.md). */
@IgnoresKeys('partition', 'from', 'to')
export class DlqQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only this queue (404 when unknown)' })
  @IsName({ optional: true, inQuery: true })
  queue?: string;

  @ApiPropertyOptional({ type: String, description: 'Only this consumer group' })
  @IsName({ optional: true, inQuery: true })
  consumerGroup?: string;

  @IntegerParameter(1, 1_000, { default: 100, description: 'Page size' })
  @ToQueryInteger()
  limit = 100;

  @IntegerParameter(0, INT32_MAX, { default: 0, description: 'Rows to skip' })
  @ToQueryInteger()
  offset = 0;
}
