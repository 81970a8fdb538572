import { Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
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
import { TransactionRequestDto } from './dto/transaction-request.dto';
import { TransactionResultDto } from './dto/transaction-result.dto';
import { TransactionRequest, TransactionRequestPipe } from './transaction-request.pipe';
import { TransactionService } from './transaction.service';
import { EXAMPLE_LEASE_ID, EXAMPLE_PARTITION_ID, EXAMPLE_TRANSACTION_ID } from '../common/api-examples';

@ApiTags('messages')
@ApiBearerAuth()
@RateLimited('produce', {
  when:
    'its acks need more than is left of RATE_LIMIT_CONSUME this second: they count one per 10000 or fewer, as the ' +
    'ack batches carrying them would (nothing is applied, and nothing is counted for them)',
})
@Controller('api/v1/transaction')
export class TransactionController {
  constructor(private readonly transactionService: TransactionService) {}

  @Post()
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Acknowledge and push atomically',
    description:
      'Runs push and ack operations in request order in one database transaction, all or nothing: a pipeline ' +
      'stage acks its input and pushes its output at once. Every requiredLeases entry must be live and the ' +
      "caller's at commit (or released by an ack of the transaction); an ack without its own leaseId is " +
      'checked against the required lease holding its partition. If anything does not apply, nothing does: ' +
      'the answer is 200 with success false, a reason and the operation at fault. Pushed messages wake parked ' +
      'polls, on every broker process, once committed, and never for a transaction rolled back. Safe to ' +
      'retry only when its pushes carry their own transactionIds: a replay of a committed transaction then ' +
      'answers reason duplicate, while minted ids would store its messages twice.',
  })
  @ApiBody({
    type: TransactionRequestDto,
    examples: {
      stage: {
        summary: 'A pipeline stage: ack the input, push the output',
        value: {
          operations: [
            {
              type: 'ack',
              transactionId: EXAMPLE_TRANSACTION_ID,
              partitionId: EXAMPLE_PARTITION_ID,
              leaseId: EXAMPLE_LEASE_ID,
            },
            {
              type: 'push',
              items: [{ queue: 'invoices', transactionId: 'invoice-for-order-42', payload: { orderId: 42 } }],
            },
          ],
          requiredLeases: [EXAMPLE_LEASE_ID],
        },
      },
    },
  })
  @ApiOkResponse({
    type: TransactionResultDto,
    description: 'Committed (success true, one result per operation) or rolled back (success false, a reason)',
    examples: {
      committed: {
        summary: 'Committed',
        value: {
          transactionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92',
          success: true,
          results: [
            {
              index: 0,
              type: 'ack',
              transactionId: 'order-42-created',
              success: true,
              error: null,
              leaseReleased: true,
              dlq: false,
            },
            {
              index: 1,
              type: 'push',
              success: true,
              items: [
                {
                  index: 0,
                  message_id: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a93',
                  transaction_id: 'invoice-for-order-42',
                  queueName: 'invoices',
                  status: 'queued',
                },
              ],
            },
          ],
        },
      },
      rolledBack: {
        summary: 'Rolled back',
        value: {
          transactionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a94',
          success: false,
          reason: 'lease_lost',
          error: 'operations[0]: invalid or expired lease',
          results: [],
        },
      },
    },
  })
  @ApiErrorResponse(
    400,
    'The request is not a transaction (nothing is applied); a malformed operation is a rolled-back answer instead',
    'operations must be an array',
    'operations must not be empty',
    'operations may hold at most 20000 operations (TRANSACTION_MAX_OPERATIONS), each ack and each push item counting one',
    'operations may hold at most 10000 push items in all',
    'requiredLeases must be an array',
  )
  @ApiAuthErrors(
    'the token has no read-write or admin role',
    {
      when: 'its pushes would create more queues or partitions than the tenant may have',
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
  @AcceptsBody('BODY_LIMIT', JSON_BODY_ELEMENTS)
  @ApiDatabaseErrors(
    'The transaction may or may not have committed: retry it with the same push transactionIds, and a ' +
      'committed one answers reason duplicate.',
  )
  @ReadsOwnBody()
  commit(
    @TenantId() tenantId: string,
    @CurrentPrincipal() principal: Principal | undefined,
    @JsonRequestBody(TransactionRequestPipe) request: TransactionRequest,
  ): Promise<TransactionResultDto> {
    return this.transactionService.commit(tenantId, principal?.subject, request);
  }
}
