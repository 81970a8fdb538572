import { applyDecorators, Controller, Get, Head, HttpCode, HttpStatus, Param, Query, UseInterceptors } from '@nestjs/common';
import {
  ApiBadRequestResponse,
  ApiBearerAuth,
  ApiExcludeEndpoint,
  ApiForbiddenResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiServiceUnavailableResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ClientAbortSignal } from '../common/client-abort.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ErrorResponseDto } from '../common/error-response.dto';
import { JsonText } from '../common/json-text';
import { MethodNotAllowedException } from '../common/method-not-allowed.exception';
import { NamePipe } from '../common/name.pipe';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { PopResponseDto } from './dto/pop-response.dto';
import { PopOptions, PopQueryPipe } from './pop-query.pipe';
import { PopService } from './pop.service';

/** The query parameters, documented in the order a reader wants them. */
const PopQueryDocs = () =>
  applyDecorators(
    ApiQuery({ name: 'batch', required: false, type: 'integer', description: 'Most messages in total (1-10000)' }),
    ApiQuery({ name: 'partitions', required: false, type: 'integer', description: 'Most partitions claimed (1-1000)' }),
    ApiQuery({ name: 'wait', required: false, type: 'boolean', description: 'Long poll for messages or timeout' }),
    ApiQuery({ name: 'timeout', required: false, type: 'integer', description: 'Long-poll timeout in ms (0-600000)' }),
    ApiQuery({ name: 'leaseSeconds', required: false, type: 'integer', description: "Default: the queue's leaseTime" }),
    ApiQuery({ name: 'consumerGroup', required: false, type: String, description: 'Default __QUEUE_MODE__' }),
    ApiQuery({
      name: 'subscriptionMode',
      required: false,
      enum: ['all', 'new', 'from_beginning', 'new-only', 'now'],
      description: "A new group's starting point, fixed at its first pop: everything (all) or after that pop (new)",
    }),
    ApiQuery({
      name: 'subscriptionFrom',
      required: false,
      type: String,
      description: "ISO-8601 starting point for a new group, or `now` (the same as subscriptionMode=new); wins over subscriptionMode",
    }),
    ApiQuery({ name: 'autoAck', required: false, type: 'boolean', description: 'Commit on delivery: leaseId null' }),
  );

const POP_DESCRIPTION =
  'Claims up to `batch` messages (in total) from up to `partitions` partitions that have messages past the ' +
  "group's cursor and no live lease, under ONE new lease id (UUIDv7) shared by every claimed partition. " +
  'Two consumers of one group never hold a partition at once; each group sees every message, in order per ' +
  'partition. A batch whose lease expired or was nacked is redelivered alone, with deliveryAttempt increased. ' +
  'With wait=true the request parks (holding no database connection) until something it could claim becomes ' +
  'claimable through any broker process (a push, a nack or retry, a lease released by an ack or expiring), ' +
  'or answers 204 at the timeout. A queue or partition that does not exist yet parks the same way: the push ' +
  'that creates it wakes the poll.';

@ApiTags('messages')
@ApiBearerAuth()
@ApiOkResponse({ type: PopResponseDto })
@ApiNoContentResponse({
  description: 'Nothing to deliver (empty body), also for a queue or partition that does not exist (yet): nothing is created',
})
@ApiBadRequestResponse({ type: ErrorResponseDto, description: 'A query parameter or name is invalid' })
@ApiUnauthorizedResponse({ type: ErrorResponseDto, description: 'Auth is on and the token is missing or invalid' })
@ApiForbiddenResponse({ type: ErrorResponseDto, description: 'The token has no read-write role' })
@ApiDatabaseErrors('Nothing was handed out; messages the pop may have claimed redeliver when that lease ends.')
@ApiServiceUnavailableResponse({
  type: ErrorResponseDto,
  description:
    'shutting down: this broker is draining (a parked long poll answers this at once), with Retry-After: 1 and ' +
    'Connection: close. Poll another broker.',
})
@PopQueryDocs()
@UseInterceptors(NoContentWhenEmptyInterceptor)
@RateLimited('consume')
@Controller('api/v1/pop/queue')
export class PopController {
  constructor(private readonly popService: PopService) {}

  /**
   * Express answers HEAD with the GET handler and drops the body: here that
   * would lease messages under an id nobody receives. Declared before the GET
   * handlers so that Express meets it first, for every spelling of the path
   * the router accepts (any letter case, a trailing slash).
   */
  @Head([':queue', ':queue/partition/:partition'])
  @Access('public')
  @ApiExcludeEndpoint()
  refuseHead(): never {
    throw new MethodNotAllowedException('GET');
  }

  @Get(':queue')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Pop from any partition of a queue', description: POP_DESCRIPTION })
  popQueue(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(PopQueryPipe) options: PopOptions,
    @ClientAbortSignal() signal: AbortSignal,
  ): Promise<JsonText | undefined> {
    return this.popService.pop(tenantId, queue, undefined, options, signal);
  }

  @Get(':queue/partition/:partition')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Pop from one partition of a queue', description: POP_DESCRIPTION })
  popPartition(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Param('partition', new NamePipe('partition')) partition: string,
    @Query(PopQueryPipe) options: PopOptions,
    @ClientAbortSignal() signal: AbortSignal,
  ): Promise<JsonText | undefined> {
    return this.popService.pop(tenantId, queue, partition, options, signal);
  }
}
