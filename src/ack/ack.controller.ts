import { Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiOkResponse,
  ApiOperation,
  ApiResponseNoStatusOptions,
  ApiTags,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse, JSON_BODY_ELEMENTS } from '../common/api-errors.decorator';
import { AcceptsBody } from '../http/body-limit.decorator';
import { FastRoute } from '../http/fast-route.decorator';
import { JsonRequestBody, ReadsOwnBody } from '../http/request-body.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { AckBatchRequestPipe, AckRequestPipe } from './ack-request.pipe';
import { AckService } from './ack.service';
import { ACK_BODY_MAX_BYTES, AckBatchRequestDto, AckCommand, AckRequestDto } from './dto/ack-request.dto';
import { AckResultDto } from './dto/ack-result.dto';
import { EXAMPLE_LEASE_ID, EXAMPLE_PARTITION_ID, EXAMPLE_TRANSACTION_ID } from '../common/api-examples';

const ACK_DESCRIPTION =
  'completed commits the cursor up to the message (never backwards) and releases the lease once its whole batch ' +
  'is committed. A failure releases the lease at once and the batch redelivers from the cursor; once retryLimit ' +
  'retries are spent, the next failure of the next message in order sends it to the dead-letter queue and the ' +
  'cursor moves past it. With leaseId only the live holder succeeds ("invalid or expired lease" otherwise, and ' +
  "nothing moves); without it there is no lease check, which can move the cursor under another worker's lease. " +
  'Unknown partitions, messages and leases, and those of other tenants, answer success false: never an error status.';

/** Per route, as a route's @HttpCode would hide a 200 declared on the class. */
const ACK_ANSWER: ApiResponseNoStatusOptions = {
  type: [AckResultDto],
  description: 'One result per acknowledgment, in request order',
  example: [
    { index: 0, transactionId: 'order-42-created', success: true, error: null, leaseReleased: false, dlq: false },
    {
      index: 1,
      transactionId: 'order-43-created',
      success: false,
      error: 'invalid or expired lease',
      leaseReleased: false,
      dlq: false,
    },
  ],
};

@ApiTags('messages')
@ApiBearerAuth()
@ApiErrorResponse(
  400,
  'Malformed request (the error names the field); nothing is applied',
  'partitionId must be a UUID',
  'acknowledgments must be an array',
  'transactionId is required',
)
@ApiAuthErrors('the token has no read-write or admin role')
@ApiDatabaseErrors(
  'The acknowledgments may or may not have been applied; do not repeat them blindly: if they were not, the batch ' +
    'redelivers when its lease expires.',
)
@RateLimited('consume')
@Controller('api/v1/ack')
export class AckController {
  constructor(private readonly ackService: AckService) {}

  @Post()
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Acknowledge one message', description: ACK_DESCRIPTION })
  @ApiBody({
    type: AckRequestDto,
    examples: {
      completed: {
        summary: 'Done',
        value: {
          transactionId: EXAMPLE_TRANSACTION_ID,
          partitionId: EXAMPLE_PARTITION_ID,
          leaseId: EXAMPLE_LEASE_ID,
          status: 'completed',
        },
      },
      failed: {
        summary: 'Failed: redeliver, spending a retry',
        value: {
          transactionId: EXAMPLE_TRANSACTION_ID,
          partitionId: EXAMPLE_PARTITION_ID,
          leaseId: EXAMPLE_LEASE_ID,
          status: 'failed',
          error: 'payment service unavailable',
        },
      },
    },
  })
  @ApiOkResponse(ACK_ANSWER)
  @AcceptsBody(ACK_BODY_MAX_BYTES, JSON_BODY_ELEMENTS)
  @ReadsOwnBody()
  ack(@TenantId() tenantId: string, @JsonRequestBody(AckRequestPipe) commands: AckCommand[]): Promise<AckResultDto[]> {
    return this.ackService.acknowledge(tenantId, commands);
  }

  @Post('batch')
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Acknowledge several messages in order, in one transaction', description: ACK_DESCRIPTION })
  @ApiBody({
    type: AckBatchRequestDto,
    examples: {
      batch: {
        summary: 'A batch of one group',
        value: {
          consumerGroup: 'billing',
          acknowledgments: [
            { transactionId: EXAMPLE_TRANSACTION_ID, partitionId: EXAMPLE_PARTITION_ID, leaseId: EXAMPLE_LEASE_ID },
          ],
        },
      },
    },
  })
  @ApiOkResponse(ACK_ANSWER)
  @AcceptsBody('BODY_LIMIT', JSON_BODY_ELEMENTS)
  @ReadsOwnBody()
  ackBatch(
    @TenantId() tenantId: string,
    @JsonRequestBody(AckBatchRequestPipe) commands: AckCommand[],
  ): Promise<AckResultDto[]> {
    return this.ackService.acknowledge(tenantId, commands);
  }
}
