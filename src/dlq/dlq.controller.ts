import { Controller, Get, Query, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { JsonText } from '../common/json-text';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { HeavyRead } from '../limits/heavy-read';
import { DlqQuery, DlqQueryPipe } from './dlq-query.pipe';
import { DlqService } from './dlq.service';
import { DeadLetterPageDto } from './dto/dead-letter.dto';
import { DlqQueryDto } from './dto/dlq-query.dto';

@ApiTags('queues')
@ApiBearerAuth()
@RateLimited('manage')
@UseInterceptors(NoContentWhenEmptyInterceptor)
@Controller('api/v1/dlq')
export class DlqController {
  constructor(private readonly dlqService: DlqService) {}

  @Get()
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({ summary: 'Read the dead-letter queue' })
  @ApiQuery({ type: DlqQueryDto })
  @ApiOkResponse({ type: DeadLetterPageDto })
  @ApiErrorResponse(400, 'Invalid query parameter', 'limit must be an integer between 1 and 1000')
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @ApiAuthErrors('the token has no read-only, read-write or admin role')
  @ApiDatabaseErrors('Nothing was changed.')
  list(@TenantId() tenantId: string, @Query(DlqQueryPipe) query: DlqQuery): Promise<JsonText> {
    return this.dlqService.list(tenantId, query);
  }
}
