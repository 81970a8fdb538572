import { Controller, Get, Head, HttpCode, HttpStatus, Param, Query, UseInterceptors } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiExcludeEndpoint,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ClientAbortSignal, HangUpSignal } from '../common/client-abort.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { JsonText } from '../common/json-text';
import { LaterAnswer } from '../common/later-answer';
import { MethodNotAllowedException } from '../common/method-not-allowed.exception';
import { NamePipe } from '../common/name.pipe';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { FastRoute } from '../http/fast-route.decorator';
import { NoRequestBody, ReadsOwnBody } from '../http/request-body.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { PopQueryDto } from './dto/pop-query.dto';
import { PopResponseDto } from './dto/pop-response.dto';
import { PopOptions, PopQueryPipe } from './pop-query.pipe';
import { PopService, TOO_MANY_WAITING } from './pop.service';

const POP_DESCRIPTION =
  'Claims up to `batch` messages (in total) from up to `partitions` partitions that have messages past the ' +
  "group's cursor and no live lease, under ONE new lease id (UUIDv7) shared by every claimed partition. " +
  'Two consumers of one group never hold a partition at once; each group sees every message, in order per ' +
  'partition. A batch whose lease expired or was nacked is redelivered alone, with deliveryAttempt increased. ' +
  'With wait=true the request parks (holding no database connection) until something it could claim becomes ' +
  'claimable through any broker process (a push, a nack or retry, a lease released by an ack or expiring), ' +
  'or answers 204 at the timeout. A queue or partition that does not exist yet parks the same way: the push ' +
  'that creates it wakes the poll.';

const QUEUE_PATH = ':queue';
const PARTITION_PATH = ':queue/partition/:partition';

/** Per route: the 200 that @HttpCode declares on a route would hide one declared on the class. */
const POP_ANSWER = { type: PopResponseDto, description: 'Messages claimed under one new lease' };

@ApiTags('messages')
@ApiBearerAuth()
@ApiNoContentResponse({
  description:
    'Nothing to deliver (empty body), also for a queue or partition that does not exist (yet): nothing is created',
})
@ApiErrorResponse(
  400,
  'A query parameter or name is invalid (the error names it)',
  'batch must be an integer between 1 and 10000',
  'queue must be 1 to 255 characters long',
)
@ApiAuthErrors('the token has no read-write or admin role')
@ApiDatabaseErrors('Nothing was handed out; messages the pop may have claimed redeliver when that lease ends.')
@ApiErrorResponse(
  503,
  'shutting down: this broker is draining (a parked long poll answers this at once), with Retry-After: 1 and ' +
    'Connection: close. Poll another broker.',
  'shutting down',
)
@ApiQuery({ type: PopQueryDto })
@UseInterceptors(NoContentWhenEmptyInterceptor)
@RateLimited('consume', {
  when: 'with wait=true, the tenant already has POP_MAX_WAITING_PER_TENANT polls waiting on this process',
  error: TOO_MANY_WAITING,
})
@Controller('api/v1/pop/queue')
export class PopController {
  constructor(private readonly popService: PopService) {}

  /** Express answers HEAD with the GET handler, which would lease messages nobody receives: declared first. */
  @Head([QUEUE_PATH, PARTITION_PATH])
  @Access('public')
  @ApiExcludeEndpoint()
  refuseHead(): never {
    throw new MethodNotAllowedException('GET');
  }

  @Get(QUEUE_PATH)
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @ReadsOwnBody()
  @Access('read-write')
  @ApiOperation({ summary: 'Pop from any partition of a queue', description: POP_DESCRIPTION })
  @ApiOkResponse(POP_ANSWER)
  popQueue(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(PopQueryPipe) options: PopOptions,
    @ClientAbortSignal() signal: HangUpSignal,
    @NoRequestBody() _body: unknown,
  ): Promise<JsonText | undefined | LaterAnswer<JsonText | undefined>> {
    return this.popService.popOrPark(tenantId, queue, undefined, options, signal);
  }

  @Get(PARTITION_PATH)
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @ReadsOwnBody()
  @Access('read-write')
  @ApiOperation({ summary: 'Pop from one partition of a queue', description: POP_DESCRIPTION })
  @ApiOkResponse(POP_ANSWER)
  popPartition(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Param('partition', new NamePipe('partition')) partition: string,
    @Query(PopQueryPipe) options: PopOptions,
    @ClientAbortSignal() signal: HangUpSignal,
    @NoRequestBody() _body: unknown,
  ): Promise<JsonText | undefined | LaterAnswer<JsonText | undefined>> {
    return this.popService.popOrPark(tenantId, queue, partition, options, signal);
  }
}
