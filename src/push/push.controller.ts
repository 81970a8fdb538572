import { Body, Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import {
  ApiBadRequestResponse,
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiForbiddenResponse,
  ApiOperation,
  ApiPayloadTooLargeResponse,
  ApiTags,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { Principal } from '../auth/principal';
import { CurrentPrincipal, TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ErrorResponseDto } from '../common/error-response.dto';
import { RateLimited } from '../limits/route-class.decorator';
import { PushItem, PushRequestDto } from './dto/push-request.dto';
import { PushResultDto } from './dto/push-result.dto';
import { PushRequestPipe } from './push-request.pipe';
import { PushService } from './push.service';

@ApiTags('messages')
@ApiBearerAuth()
@RateLimited('produce')
@Controller('api/v1/push')
export class PushController {
  constructor(private readonly pushService: PushService) {}

  @Post()
  @HttpCode(HttpStatus.CREATED)
  @Access('write')
  @ApiOperation({
    summary: 'Push messages',
    description:
      'Validates the whole request, then writes every item in one transaction. Queues and partitions are ' +
      'created on first push. A transactionId already stored in the partition is reported as duplicate with ' +
      "the original message_id and not stored again. Wakes long polls parked on the queues, on every broker process.",
  })
  @ApiBody({ type: PushRequestDto })
  @ApiCreatedResponse({ type: [PushResultDto], description: 'One result per item, in request order' })
  @ApiBadRequestResponse({ type: ErrorResponseDto, description: 'items is not an array, or an item is invalid' })
  @ApiUnauthorizedResponse({ type: ErrorResponseDto, description: 'Auth is on and the token is missing or invalid' })
  @ApiForbiddenResponse({ type: ErrorResponseDto, description: 'No write-only, read-write or admin role' })
  @ApiPayloadTooLargeResponse({ type: ErrorResponseDto, description: 'Body above BODY_LIMIT' })
  @ApiDatabaseErrors(
    'The push may or may not have been stored: retry it with the same transactionIds, and a stored message ' +
      'answers duplicate with its original message_id.',
  )
  push(
    @TenantId() tenantId: string,
    @CurrentPrincipal() principal: Principal | undefined,
    @Body(PushRequestPipe) items: PushItem[],
  ): Promise<PushResultDto[]> {
    return this.pushService.push(tenantId, principal?.subject, items);
  }
}
