import { applyDecorators, Controller, Get, Query } from '@nestjs/common';
import {
  ApiBadRequestResponse,
  ApiBearerAuth,
  ApiForbiddenResponse,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ErrorResponseDto } from '../common/error-response.dto';
import { RateLimited } from '../limits/route-class.decorator';
import { DlqQuery, DlqQueryPipe } from './dlq-query.pipe';
import { DlqService } from './dlq.service';
import { DeadLetterPageDto } from './dto/dead-letter.dto';

/** The query parameters, documented in the order a reader wants them. */
const DlqQueryDocs = () =>
  applyDecorators(
    ApiQuery({ name: 'queue', required: false, type: String, description: 'Only this queue (404 when unknown)' }),
    ApiQuery({ name: 'consumerGroup', required: false, type: String, description: 'Only this consumer group' }),
    ApiQuery({ name: 'limit', required: false, type: 'integer', description: 'Page size, 1-1000', example: 100 }),
    ApiQuery({ name: 'offset', required: false, type: 'integer', description: 'Rows to skip', example: 0 }),
  );

@ApiTags('queues')
@ApiBearerAuth()
@RateLimited('manage')
@Controller('api/v1/dlq')
export class DlqController {
  constructor(private readonly dlqService: DlqService) {}

  @Get()
  @Access('read-only')
  @ApiOperation({ summary: 'Read the dead-letter queue' })
  @DlqQueryDocs()
  @ApiOkResponse({ type: DeadLetterPageDto })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'Invalid query parameter' })
  @ApiNotFoundResponse({ type: ErrorResponseDto, description: 'No such queue in this tenant' })
  @ApiUnauthorizedResponse({ type: ErrorResponseDto, description: 'Auth is on and the token is missing or invalid' })
  @ApiForbiddenResponse({ type: ErrorResponseDto, description: 'The token has no read-only, read-write or admin role' })
  @ApiDatabaseErrors('Nothing was changed.')
  list(@TenantId() tenantId: string, @Query(DlqQueryPipe) query: DlqQuery): Promise<DeadLetterPageDto> {
    return this.dlqService.list(tenantId, query);
  }
}
