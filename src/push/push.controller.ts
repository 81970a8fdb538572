import { Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { Principal } from '../auth/principal';
import { CurrentPrincipal, TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse, JSON_BODY_ELEMENTS } from '../common/api-errors.decorator';
import { AcceptsBody } from '../http/body-limit.decorator';
import { FastRoute } from '../http/fast-route.decorator';
import { JsonRequestBody, ReadsOwnBody } from '../http/request-body.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { quotaRefusal, STORAGE_QUOTA_REFUSALS } from '../limits/tenant-quotas';
import { PushItem, PushRequestDto } from './dto/push-request.dto';
import { PushResultDto } from './dto/push-result.dto';
import { PushRequestPipe } from './push-request.pipe';
import { PushService } from './push.service';
import { EXAMPLE_PARTITION, EXAMPLE_QUEUE, EXAMPLE_TRANSACTION_ID } from '../common/api-examples';

@ApiTags('messages')
@ApiBearerAuth()
@RateLimited('produce')
@Controller('api/v1/push')
export class PushController {
  constructor(private readonly pushService: PushService) {}

  @Post()
  @FastRoute()
  @HttpCode(HttpStatus.CREATED)
  @Access('write')
  @ApiOperation({
    summary: 'Push messages',
    description:
      'Validates the whole request, then writes every item in one transaction. Queues and partitions are ' +
      'created on first push. A transactionId already stored in the partition is reported as duplicate with ' +
      'the original message_id and not stored again. Wakes long polls parked on the queues, on every broker process.',
  })
  @ApiBody({
    type: PushRequestDto,
    examples: {
      push: {
        summary: "One order, in its customer's partition",
        value: {
          items: [
            {
              queue: EXAMPLE_QUEUE,
              partition: EXAMPLE_PARTITION,
              transactionId: EXAMPLE_TRANSACTION_ID,
              payload: { orderId: 42, total: 99.5 },
            },
          ],
        },
      },
    },
  })
  @ApiCreatedResponse({ type: [PushResultDto], description: 'One result per item, in request order' })
  @ApiErrorResponse(
    400,
    'items is not an array, or an item is invalid (the error names it); nothing is stored',
    'items[2].payload is required (null is allowed)',
    'items may hold at most 10000 messages',
    'invalid JSON body',
  )
  @ApiAuthErrors(
    'the token has no write-only, read-write or admin role',
    {
      when: 'the push would create more queues or partitions than the tenant may have',
      error: quotaRefusal('queues', 1_000),
    },
    ...STORAGE_QUOTA_REFUSALS,
  )
  @ApiErrorResponse(
    503,
    "The tenant's pushes are paused for maintenance (POST /api/v1/system/maintenance); nothing is stored. " +
      'Retry after Retry-After seconds.',
    'maintenance: pushes are paused',
  )
  @AcceptsBody('BODY_LIMIT', JSON_BODY_ELEMENTS, {
    when: "an item's payload is above MESSAGE_MAX_BYTES as minified JSON text",
    error: 'items[1].payload is larger than 4194304 bytes (4194306)',
  })
  @ApiDatabaseErrors(
    'The push may or may not have been stored: retry it with the same transactionIds, and a stored message ' +
      'answers duplicate with its original message_id.',
  )
  @ReadsOwnBody()
  push(
    @TenantId() tenantId: string,
    @CurrentPrincipal() principal: Principal | undefined,
    @JsonRequestBody(PushRequestPipe) items: PushItem[],
  ): Promise<PushResultDto[]> {
    return this.pushService.push(tenantId, principal?.subject, items);
  }
}
