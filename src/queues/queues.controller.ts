import { Body, Controller, Delete, Get, HttpCode, HttpStatus, Param, Post, Query } from '@nestjs/common';
import {
  ApiBadRequestResponse,
  ApiBearerAuth,
  ApiBody,
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
import { NamePipe } from '../common/name.pipe';
import { RateLimited } from '../limits/route-class.decorator';
import { ConfigureRequestPipe } from './configure-request.pipe';
import { ConfigureCommand, ConfigureRequestDto } from './dto/configure-request.dto';
import { QueueListQuery, QueueListQueryPipe } from './queue-list-query.pipe';
import {
  ConfigureResponseDto,
  DeleteQueueResponseDto,
  QueueDetailDto,
  QueueListDto,
} from './dto/queue-response.dto';
import { QueuesService } from './queues.service';

@ApiTags('queues')
@ApiBearerAuth()
@ApiUnauthorizedResponse({ type: ErrorResponseDto, description: 'Auth is on and the token is missing or invalid' })
@ApiForbiddenResponse({ type: ErrorResponseDto, description: "The token's roles do not allow this route" })
@RateLimited('manage')
@Controller('api/v1')
export class QueuesController {
  constructor(private readonly queuesService: QueuesService) {}

  @Post('configure')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Create a queue or change its options',
    description:
      'leaseTime (default leaseSeconds of a pop), retryLimit (failures redelivered before dead-lettering), ' +
      'deadLetterQueue (false drops messages that use up their retries). Options not sent keep their value. ' +
      'Unknown options are stored and echoed for compatibility, not interpreted.',
  })
  @ApiBody({ type: ConfigureRequestDto })
  @ApiOkResponse({ type: ConfigureResponseDto })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'Invalid queue name or option value' })
  @ApiDatabaseErrors('The options may or may not have been applied; configure is idempotent: send it again.')
  configure(
    @TenantId() tenantId: string,
    @Body(ConfigureRequestPipe) command: ConfigureCommand,
  ): Promise<ConfigureResponseDto> {
    return this.queuesService.configure(tenantId, command);
  }

  @Get('resources/queues')
  @Access('read-only')
  @ApiOperation({
    summary: "The tenant's queues with their options and counts",
    description:
      'By name, up to `limit` queues, fewer when the answer would pass RESPONSE_MAX_BYTES; `next` is the name to ' +
      'pass as `after` for the rest (null: there is none).',
  })
  @ApiQuery({ name: 'after', required: false, type: String, description: 'Only queues whose name sorts after this' })
  @ApiQuery({ name: 'limit', required: false, type: 'integer', description: 'Most queues (1-1000, default 1000)' })
  @ApiOkResponse({ type: QueueListDto })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'Invalid after or limit' })
  @ApiDatabaseErrors('Nothing was changed.')
  list(@TenantId() tenantId: string, @Query(QueueListQueryPipe) page: QueueListQuery): Promise<QueueListDto> {
    return this.queuesService.list(tenantId, page);
  }

  @Get('resources/queues/:queue')
  @Access('read-only')
  @ApiOperation({
    summary: 'One queue: partitions, and per consumer group its cursors, lag and live leases',
    description: 'Lease ids are never shown: a read-only caller could otherwise extend or ack with them.',
  })
  @ApiOkResponse({ type: QueueDetailDto })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'Invalid queue name' })
  @ApiNotFoundResponse({ type: ErrorResponseDto, description: 'No such queue in this tenant' })
  @ApiDatabaseErrors('Nothing was changed.')
  detail(@TenantId() tenantId: string, @Param('queue', new NamePipe('queue')) queue: string): Promise<QueueDetailDto> {
    return this.queuesService.detail(tenantId, queue);
  }

  @Delete('resources/queues/:queue')
  @HttpCode(HttpStatus.OK)
  @Access('admin')
  @ApiOperation({
    summary: 'Delete a queue with its partitions, messages, cursors, leases and dead letters',
    description: 'Idempotent: a queue that does not exist answers 200 with deleted and existed false.',
  })
  @ApiOkResponse({ type: DeleteQueueResponseDto })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'Invalid queue name' })
  @ApiDatabaseErrors('The queue may or may not have been deleted; delete is idempotent: send it again.')
  delete(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
  ): Promise<DeleteQueueResponseDto> {
    return this.queuesService.delete(tenantId, queue);
  }
}
