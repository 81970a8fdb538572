import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { QueryDtoPipe } from '../common/dto-validation';
import { NamePipe } from '../common/name.pipe';
import { RateLimited } from '../limits/route-class.decorator';
import { HistoryQueryDto, QueueHistoryDto, TenantHistoryDto } from './dto/history.dto';
import { HistoryService } from './history.service';

const RANGE_PROBLEM = 'range must be one of hour, day, week';

@ApiTags('queues')
@ApiBearerAuth()
@ApiAuthErrors("the token's roles do not open this route (read-only)")
@RateLimited('manage')
@Controller('api/v1/resources')
export class HistoryController {
  constructor(private readonly history: HistoryService) {}

  @Get('history')
  @Access('read-only')
  @ApiOperation({
    summary: "What the tenant's queues did, minute by minute: the last hour, day or week",
    description:
      'Messages pushed, popped, acked and dead-lettered per step, and the longest wait of a delivered message, over ' +
      'all the tenant\'s queues, kept by the broker as it counts (docs/console.md, "History"). Quiet steps are zeros.',
  })
  @ApiQuery({ type: HistoryQueryDto })
  @ApiOkResponse({ type: TenantHistoryDto })
  @ApiErrorResponse(400, 'Invalid range', RANGE_PROBLEM)
  @ApiDatabaseErrors('Nothing was changed.')
  tenant(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(HistoryQueryDto)) query: HistoryQueryDto,
  ): Promise<TenantHistoryDto> {
    return this.history.tenant(tenantId, query.range);
  }

  @Get('queues/:queue/history')
  @Access('read-only')
  @ApiOperation({
    summary: 'What one queue did, minute by minute, and how far behind it was: the last hour, day or week',
    description:
      'As the tenant-wide history, plus the lag (messages waiting) at each step, carried across quiet steps.',
  })
  @ApiQuery({ type: HistoryQueryDto })
  @ApiOkResponse({ type: QueueHistoryDto })
  @ApiErrorResponse(400, 'Invalid queue name or range', RANGE_PROBLEM)
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @ApiDatabaseErrors('Nothing was changed.')
  queue(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(new QueryDtoPipe(HistoryQueryDto)) query: HistoryQueryDto,
  ): Promise<QueueHistoryDto> {
    return this.history.queue(tenantId, queue, query.range);
  }
}
