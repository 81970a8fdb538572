import { Body, Controller, Delete, Get, HttpCode, HttpStatus, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { Principal } from '../auth/principal';
import { CurrentPrincipal, TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse, JSON_BODY_ELEMENTS } from '../common/api-errors.decorator';
import { AcceptsBody } from '../http/body-limit.decorator';
import { NoQueryParameters, QueryDtoPipe } from '../common/dto-validation';
import { NamePipe } from '../common/name.pipe';
import { LeaseListDto, LeaseListQueryDto } from './dto/lease-list.dto';
import { RateLimited } from '../limits/route-class.decorator';
import { HeavyRead } from '../limits/heavy-read';
import { QuotaUsageDto } from '../limits/dto/quota-usage.dto';
import { quotaRefusal, TenantQuotas } from '../limits/tenant-quotas';
import { ConfigureRequestPipe } from './configure-request.pipe';
import { CONFIGURE_BODY_MAX_BYTES, ConfigureCommand, ConfigureRequestDto } from './dto/configure-request.dto';
import { QueueDetailQueryDto, QueueListQueryDto } from './dto/queue-list-query.dto';
import { QueueDetailQueryPipe, QueueListQuery, QueueListQueryPipe } from './queue-list-query.pipe';
import {
  ConfigureResponseDto,
  DeleteQueueResponseDto,
  NamespacesDto,
  QueueDetailDto,
  QueueListDto,
  TasksDto,
} from './dto/queue-response.dto';
import { QueuesService } from './queues.service';
import { EXAMPLE_QUEUE } from '../common/api-examples';
import { INT32_MAX } from '../common/input';

@ApiTags('queues')
@ApiBearerAuth()
@ApiAuthErrors(
  "the token's roles do not open this route (configure: read-write; listings and quotas: read-only; delete: admin)",
)
@RateLimited('manage')
@Controller('api/v1')
export class QueuesController {
  constructor(
    private readonly queuesService: QueuesService,
    private readonly quotaLimits: TenantQuotas,
  ) {}

  @Post('configure')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Create a queue or change its options',
    description:
      'leaseTime (default leaseSeconds of a pop), retryLimit (failures redelivered before dead-lettering), ' +
      'deadLetterQueue or dlqAfterMaxRetries (both false drops messages that use up their retries), retryDelay ' +
      '(milliseconds before a nacked or expired batch is offered again), ttl (seconds a message may go unconsumed), ' +
      'delayedProcessing, windowBuffer, priority, encryptionEnabled (payloads of new messages stored encrypted) and ' +
      'the retention options (docs/retention.md); namespace and task, beside options, group queues for a discovery ' +
      'pop. Options not sent keep their value. An option the broker does not implement is refused with a 400 naming it.',
  })
  @ApiBody({
    type: ConfigureRequestDto,
    examples: {
      configure: {
        summary: 'A queue whose handlers take up to a minute',
        value: {
          queue: EXAMPLE_QUEUE,
          options: { leaseTime: 60, retryLimit: 3, deadLetterQueue: true, retryDelay: 1000 },
        },
      },
    },
  })
  @ApiOkResponse({ type: ConfigureResponseDto })
  @ApiErrorResponse(
    400,
    'Invalid queue name or option value (the error names it); nothing is changed',
    `options.leaseTime must be an integer between 1 and ${INT32_MAX}`,
    'options.visibility is not a supported option',
    `options.retryDelay must be an integer between 0 and ${INT32_MAX}`,
    'options.encryptionEnabled needs an encryption key on the broker: set ENCRYPTION_KEYS (or QUEEN_ENCRYPTION_KEY)',
    'queue is required',
  )
  @ApiAuthErrors(
    'the token has no read-write or admin role',
    { when: 'the queue would be one more than the tenant may have', error: quotaRefusal('queues', 1_000) },
    {
      when:
        'a token without the admin role (the one clearing a queue needs) sends a retention option that deletes ' +
        'or evicts sooner than the value in force, or one below QUEUE_MIN_RETENTION_SECONDS; nothing is changed',
      error:
        'options.retentionSeconds: deleting unconsumed messages sooner than the value in force (1209600 s) needs ' +
        'the admin role',
    },
  )
  @AcceptsBody(CONFIGURE_BODY_MAX_BYTES, JSON_BODY_ELEMENTS)
  @ApiDatabaseErrors('The options may or may not have been applied; configure is idempotent: send it again.')
  configure(
    @TenantId() tenantId: string,
    @CurrentPrincipal() principal: Principal,
    @Body(ConfigureRequestPipe) command: ConfigureCommand,
  ): Promise<ConfigureResponseDto> {
    return this.queuesService.configure(tenantId, principal.roles, command);
  }

  @Get('resources/queues')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: "The tenant's queues with their options and counts",
    description:
      'By name, up to `limit` queues, fewer when the answer would pass RESPONSE_MAX_BYTES; `next` is the name to ' +
      'pass as `after` for the rest (null: there is none).',
  })
  @ApiQuery({ type: QueueListQueryDto })
  @ApiOkResponse({ type: QueueListDto })
  @ApiErrorResponse(400, 'Invalid after or limit', 'limit must be an integer between 1 and 1000')
  @ApiDatabaseErrors('Nothing was changed.')
  list(@TenantId() tenantId: string, @Query(QueueListQueryPipe) page: QueueListQuery): Promise<QueueListDto> {
    return this.queuesService.list(tenantId, page);
  }

  @Get('resources/namespaces')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({ summary: "The tenant's queues grouped by namespace, with counts" })
  @ApiOkResponse({ type: NamespacesDto })
  @ApiDatabaseErrors('Nothing was changed.')
  namespaces(@TenantId() tenantId: string): Promise<NamespacesDto> {
    return this.queuesService.namespaces(tenantId);
  }

  @Get('resources/tasks')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({ summary: "The tenant's queues grouped by task, with counts" })
  @ApiOkResponse({ type: TasksDto })
  @ApiDatabaseErrors('Nothing was changed.')
  tasks(@TenantId() tenantId: string): Promise<TasksDto> {
    return this.queuesService.tasks(tenantId);
  }

  @Get('resources/quotas')
  @Access('read-only')
  @ApiOperation({
    summary: "The tenant's quotas, each with what the tenant uses of it",
    description:
      'Queues, partitions, consumer groups, stored payload bytes and stored messages (dead letters included), ' +
      'each with its setting, its limit (null: none) and its use (docs/limits.md).',
  })
  @ApiOkResponse({ type: QuotaUsageDto })
  @ApiDatabaseErrors('Nothing was changed.')
  async quotas(@TenantId() tenantId: string): Promise<QuotaUsageDto> {
    return { quotas: await this.quotaLimits.usage(tenantId) };
  }

  @Get('resources/queues/:queue')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: 'One queue: partitions, and per consumer group its cursors, lag and live leases',
    description:
      'Partitions are paged by name (limit, after; partitionsNext is the after of the next page). Lease ids are ' +
      'never shown: a read-only caller could otherwise extend or ack with them.',
  })
  @ApiQuery({ type: QueueDetailQueryDto })
  @ApiOkResponse({ type: QueueDetailDto })
  @ApiErrorResponse(400, 'Invalid queue name or query parameter', 'queue must be 1 to 255 characters long')
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @ApiDatabaseErrors('Nothing was changed.')
  detail(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(QueueDetailQueryPipe) query: QueueDetailQueryDto,
  ): Promise<QueueDetailDto> {
    return this.queuesService.detail(tenantId, queue, query.after, query.limit);
  }

  @Get('resources/queues/:queue/leases')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: "The queue's live leases, the soonest to expire first",
    description:
      'Per lease its group, partition, epoch, time left by the database clock, renewals and the slack of the ' +
      'last one. A lease id shows only its last characters: enough for the holder to recognise it, not to use it.',
  })
  @ApiQuery({ type: LeaseListQueryDto })
  @ApiOkResponse({ type: LeaseListDto })
  @ApiErrorResponse(400, 'Invalid queue name or limit', 'limit must be an integer between 1 and 1000')
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @ApiDatabaseErrors('Nothing was changed.')
  leases(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(new QueryDtoPipe(LeaseListQueryDto)) query: LeaseListQueryDto,
  ): Promise<LeaseListDto> {
    return this.queuesService.leases(tenantId, queue, query.limit);
  }

  @Delete('resources/queues/:queue')
  @HttpCode(HttpStatus.OK)
  @Access('admin')
  @ApiOperation({
    summary: 'Delete a queue with its partitions, messages, cursors, leases and dead letters',
    description: 'Idempotent: a queue that does not exist answers 200 with deleted and existed false.',
  })
  @ApiOkResponse({ type: DeleteQueueResponseDto })
  @ApiErrorResponse(400, 'Invalid queue name', 'queue must not contain control characters')
  @ApiDatabaseErrors('The queue may or may not have been deleted; delete is idempotent: send it again.')
  delete(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<DeleteQueueResponseDto> {
    return this.queuesService.delete(tenantId, queue);
  }
}
