import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIntegerBetween, IsName, ToQueryInteger } from '../../common/contract-validators';
import { IgnoresKeys } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';

/** Queen's client sends these filters of its own broker's listing; this one does not filter by them (docs/api.md). */
@IgnoresKeys('partition', 'from', 'to')
export class DlqQueryDto {
  @ApiPropertyOptional({ type: String, description: 'Only this queue (404 when unknown)' })
  @IsName({ optional: true, inQuery: true })
  queue?: string;

  @ApiPropertyOptional({ type: String, description: 'Only this consumer group' })
  @IsName({ optional: true, inQuery: true })
  consumerGroup?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000, default: 100, description: 'Page size' })
  @ToQueryInteger()
  @IsIntegerBetween(1, 1_000)
  limit = 100;

  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: INT32_MAX, default: 0, description: 'Rows to skip' })
  @ToQueryInteger()
  @IsIntegerBetween(0, INT32_MAX)
  offset = 0;
}
