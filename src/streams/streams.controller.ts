import { Body, Controller, Delete, Get, HttpCode, HttpStatus, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiConflictResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { Principal } from '../auth/principal';
import { CurrentPrincipal, TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse, JSON_BODY_ELEMENTS } from '../common/api-errors.decorator';
import { NoQueryParameters, QueryDtoPipe, validateBody } from '../common/dto-validation';
import { NamePipe } from '../common/name.pipe';
import { AcceptsBody } from '../http/body-limit.decorator';
import { FastRoute } from '../http/fast-route.decorator';
import { JsonRequestBody, ReadsOwnBody } from '../http/request-body.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { quotaRefusal } from '../limits/tenant-quotas';
import { CycleCommand, CycleRequestPipe } from './cycle-request.pipe';
import { CycleRefusalDto, CycleRequestDto, CycleResponseDto } from './dto/cycle.dto';
import { RegisterQueryDto, RegisterQueryResponseDto, StreamQueryListDto } from './dto/register-query.dto';
import { StateGetDto, StateGetResponseDto } from './dto/state-get.dto';
import { QUERY_NOT_FOUND, StreamsService } from './streams.service';

const QUERY_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const PARTITION_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92';
const LEASE_ID = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91';

/** Queen 0.15's streaming SDK (its Stream builder's runner) calls these three routes; the other two are operators'. */
@ApiTags('streams')
@ApiBearerAuth()
@Controller('streams/v1')
export class StreamsController {
  constructor(private readonly streams: StreamsService) {}

  @Post('queries')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @RateLimited('manage')
  @ApiOperation({
    summary: 'Register a stream query',
    description:
      "Idempotent by name, per tenant. Creates the source queue when missing. The same config_hash (the SDK's " +
      'fingerprint of the operator chain) resumes the query with its state; another one is refused with 409 ' +
      'unless reset is true, which deletes the state first and answers reset true.',
  })
  @ApiBody({
    type: RegisterQueryDto,
    examples: {
      register: {
        summary: 'A tumbling-window sum over orders',
        value: {
          name: 'orders.per_customer_per_min',
          source_queue: 'orders',
          sink_queue: 'orders.totals_per_customer_per_min',
          config_hash: '9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a',
          reset: false,
        },
      },
    },
  })
  @ApiOkResponse({ type: RegisterQueryResponseDto })
  @ApiConflictResponse({
    description: 'Registered before with another config_hash, and reset was not asked; nothing changed',
    schema: {
      example: {
        success: false,
        query_id: QUERY_ID,
        name: 'orders.per_customer_per_min',
        error:
          "config_hash mismatch: the operator chain of query 'orders.per_customer_per_min' changed. Register with " +
          'reset: true to delete its state, or use another name.',
      },
    },
  })
  @ApiErrorResponse(400, 'A field is missing or invalid (the error names it)', 'config_hash is required')
  @ApiAuthErrors('the token has no read-write or admin role', {
    when: 'the source queue would be one more than the tenant may have',
    error: quotaRefusal('queues', 1_000),
  })
  @AcceptsBody(16 * 1024)
  @ApiDatabaseErrors('The query may or may not have been registered; registration is idempotent: send it again.')
  register(@TenantId() tenantId: string, @Body() body: unknown): Promise<RegisterQueryResponseDto> {
    return this.streams.register(tenantId, validateBody(RegisterQueryDto, body));
  }

  @Get('queries')
  @Access('read-only')
  @RateLimited('manage')
  @ApiOperation({ summary: "The tenant's stream queries, by name (at most 1000)" })
  @ApiOkResponse({ type: StreamQueryListDto })
  @ApiAuthErrors('the token has no role that may read')
  @ApiDatabaseErrors('Nothing changed; ask again.')
  list(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<StreamQueryListDto> {
    return this.streams.list(tenantId);
  }

  @Delete('queries/:name')
  @HttpCode(HttpStatus.OK)
  @Access('admin')
  @RateLimited('manage')
  @ApiOperation({
    summary: 'Delete a stream query and its state',
    description:
      'Its state, over all partitions, goes with it; a runner still using it has its next cycle refused (404). ' +
      'Deleting the source queue deletes its queries too.',
  })
  @ApiOkResponse({ schema: { example: { deleted: true } } })
  @ApiErrorResponse(404, 'No query by that name in this tenant', QUERY_NOT_FOUND)
  @ApiAuthErrors('the token has no admin role')
  @ApiDatabaseErrors('The query may or may not have been deleted: send it again (404 once it is gone).')
  async delete(
    @TenantId() tenantId: string,
    @Param('name', new NamePipe('name')) name: string,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<{ deleted: true }> {
    await this.streams.delete(tenantId, name);
    return { deleted: true };
  }

  @Post('cycle')
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @RateLimited('produce', {
    when: 'it carries an ack and RATE_LIMIT_CONSUME is used up this second (it counts one, as an ack batch)',
  })
  @ApiOperation({
    summary: 'Commit a stream cycle: state, sink pushes and the source ack, all or nothing',
    description:
      'One database transaction on the path POST /api/v1/transaction takes. With an ack that names a leaseId, ' +
      'the cycle commits only while that lease is live on the partition by the database clock, to the end, and ' +
      '(with leaseEpoch) while no later claim fenced it: a worker that lost its lease writes no state and ' +
      'emits nothing. A cycle without an ack (an idle flush of ripe windows) writes state and pushes only. ' +
      'State is kept per query and source partition; the partition must belong to the source queue (or hold ' +
      'state of the query already). A refusal is 409 with success false, a reason and the error; nothing is applied.',
  })
  @ApiBody({
    type: CycleRequestDto,
    examples: {
      cycle: {
        summary: 'A window closes: its sum goes to the sink, its state is deleted, the batch is acked',
        value: {
          query_id: QUERY_ID,
          partition_id: PARTITION_ID,
          consumer_group: 'streams.orders.per_customer_per_min',
          state_ops: [
            { type: 'delete', key: 'tumb:60\u001fcustomer-7\u001f2026-12-06T01:00:00.000Z' },
            {
              type: 'upsert',
              key: 'tumb:60\u001fcustomer-7\u001f2026-12-06T01:01:00.000Z',
              value: { acc: 12, windowStart: 1796518860000, windowEnd: 1796518920000 },
            },
          ],
          push_items: [{ queue: 'orders.totals_per_customer_per_min', partition: 'customer-7', payload: { sum: 30 } }],
          ack: { transactionId: 'order-42-created', leaseId: LEASE_ID, status: 'completed', count: 3 },
          release_lease: true,
        },
      },
    },
  })
  @ApiOkResponse({ type: CycleResponseDto })
  @ApiConflictResponse({
    type: CycleRefusalDto,
    description: 'Refused: the source lease is not live or was fenced, the ack did not apply, or a push did not fit',
    examples: {
      lease_lost: {
        summary: 'A worker that lost its lease',
        value: {
          success: false,
          query_id: QUERY_ID,
          partition_id: PARTITION_ID,
          reason: 'lease_lost',
          error: 'ack: invalid or expired lease',
        },
      },
      queue_full: {
        summary: 'A sink push past its queue maxSize',
        value: {
          success: false,
          query_id: QUERY_ID,
          partition_id: PARTITION_ID,
          reason: 'queue_full',
          error: 'push_items[0]: queue is full',
        },
      },
    },
  })
  @ApiErrorResponse(404, 'No query with that query_id in this tenant (deleted, or never registered)', QUERY_NOT_FOUND)
  @ApiErrorResponse(
    400,
    'The body is not a cycle (the error names the field); nothing is applied',
    'query_id must be a UUID',
    'state_ops[0].type must be upsert or delete',
    'state_ops and push_items may hold at most 20000 entries together (TRANSACTION_MAX_OPERATIONS)',
  )
  @ApiErrorResponse(
    503,
    "The tenant's pushes are paused for maintenance and the cycle pushes; nothing is applied. Retry after Retry-After.",
    'maintenance: pushes are paused',
  )
  @ApiAuthErrors('the token has no read-write or admin role', {
    when: 'its pushes would create more queues or partitions than the tenant may have',
    error: quotaRefusal('queues', 1_000),
  })
  @AcceptsBody('BODY_LIMIT', JSON_BODY_ELEMENTS)
  @ApiDatabaseErrors(
    'The cycle may or may not have committed. A committed one moved the cursor past the acked message: the next ' +
      'pop shows which.',
  )
  @ReadsOwnBody()
  cycle(
    @TenantId() tenantId: string,
    @CurrentPrincipal() principal: Principal | undefined,
    @JsonRequestBody(CycleRequestPipe) command: CycleCommand,
  ): Promise<CycleResponseDto> {
    return this.streams.cycle(tenantId, principal?.subject, command);
  }

  @Post('state/get')
  @FastRoute()
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @RateLimited('consume')
  @ApiOperation({
    summary: "Read a stream query's state on one partition",
    description:
      'The rows of the query on that source partition, in key order, filtered by keys, key_prefix and ' +
      "ripe_at_or_before (the SDK's idle flush finds ripe windows with it); at most 10000 rows, truncated says " +
      'when more matched.',
  })
  @ApiBody({
    type: StateGetDto,
    examples: {
      all: { summary: 'All of a partition', value: { query_id: QUERY_ID, partition_id: PARTITION_ID, keys: [] } },
      ripe: {
        summary: 'Windows ripe for an idle flush',
        value: {
          query_id: QUERY_ID,
          partition_id: PARTITION_ID,
          keys: [],
          key_prefix: 'tumb:60\u001f',
          ripe_at_or_before: 1796518920000,
        },
      },
    },
  })
  @ApiOkResponse({ type: StateGetResponseDto })
  @ApiErrorResponse(404, 'No query with that query_id in this tenant', QUERY_NOT_FOUND)
  @ApiErrorResponse(400, 'A field is invalid (the error names it)', 'partition_id must be a UUID')
  @ApiAuthErrors('the token has no read-write or admin role')
  @AcceptsBody(2 * 1024 * 1024)
  @ApiDatabaseErrors('Nothing changed; ask again.')
  @ReadsOwnBody()
  state(@TenantId() tenantId: string, @JsonRequestBody() body: unknown): Promise<StateGetResponseDto> {
    return this.streams.state(tenantId, validateBody(StateGetDto, body));
  }
}
