import { Controller, Get, Head, HttpCode, HttpStatus, Query, UseInterceptors } from '@nestjs/common';
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
import { contractException } from '../common/dto-validation';
import { JsonText } from '../common/json-text';
import { MethodNotAllowedException } from '../common/method-not-allowed.exception';
import { OptionalNamePipe } from '../common/name.pipe';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { PopQueryDto } from './dto/pop-query.dto';
import { PopResponseDto } from './dto/pop-response.dto';
import { PopOptions, PopQueryPipe } from './pop-query.pipe';
import { DISCOVERY_MAX_QUEUES, PopService, TOO_MANY_WAITING } from './pop.service';

@ApiTags('messages')
@ApiBearerAuth()
@UseInterceptors(NoContentWhenEmptyInterceptor)
@RateLimited('consume', {
  when: 'with wait=true, the tenant would have more than POP_MAX_WAITING_PER_TENANT polls waiting on this process',
  error: TOO_MANY_WAITING,
})
@Controller('api/v1/pop')
export class DiscoveryPopController {
  constructor(private readonly popService: PopService) {}

  /** As for the queue pops: HEAD would run the GET handler and lease messages nobody receives. */
  @Head()
  @Access('public')
  @ApiExcludeEndpoint()
  refuseHead(): never {
    throw new MethodNotAllowedException('GET');
  }

  @Get()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Pop from whichever queue of a namespace or task has messages, highest priority first',
    description:
      'Serves the queues configured with this namespace and/or task (at most ' +
      `${DISCOVERY_MAX_QUEUES}, by priority then name): the first with something claimable answers, as a queue ` +
      'pop would, and the answer names the queue. With wait=true the poll parks on every one of them (counting ' +
      'once towards POP_MAX_WAITING_PER_TENANT) until any has something. The other query parameters are ' +
      "the queue pop's.",
  })
  @ApiQuery({ name: 'namespace', required: false, description: 'Queues configured with this namespace' })
  @ApiQuery({ name: 'task', required: false, description: 'Queues configured with this task' })
  @ApiQuery({ type: PopQueryDto })
  @ApiOkResponse({ type: PopResponseDto, description: 'Messages of one queue claimed under one new lease' })
  @ApiNoContentResponse({ description: 'Nothing to deliver in any matching queue (empty body)' })
  @ApiErrorResponse(400, 'Neither filter, or an invalid parameter', 'namespace or task is required')
  @ApiAuthErrors('the token has no read-write or admin role')
  @ApiDatabaseErrors('Nothing was handed out; messages the pop may have claimed redeliver when that lease ends.')
  @ApiErrorResponse(503, 'shutting down: this broker is draining. Poll another broker.', 'shutting down')
  pop(
    @TenantId() tenantId: string,
    @Query('namespace', new OptionalNamePipe('namespace')) namespace: string | undefined,
    @Query('task', new OptionalNamePipe('task')) task: string | undefined,
    @Query(PopQueryPipe) options: PopOptions,
    @ClientAbortSignal() signal: HangUpSignal,
  ): Promise<JsonText | undefined> {
    if (namespace === undefined && task === undefined) throw contractException('namespace or task is required');
    return this.popService.discover(tenantId, { namespace, task }, options, signal);
  }
}
