import { Body, Controller, Get, Injectable, Param, PipeTransform, Post, Query, UseInterceptors } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse, JSON_BODY_ELEMENTS } from '../common/api-errors.decorator';
import { contractException, NoQueryParameters, QueryDtoPipe } from '../common/dto-validation';
import { JsonText } from '../common/json-text';
import { NamePipe } from '../common/name.pipe';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { isUuid } from '../common/uuid';
import { AcceptsBody } from '../http/body-limit.decorator';
import { HeavyRead } from '../limits/heavy-read';
import { RateLimited } from '../limits/route-class.decorator';
import {
  TRACE_BODY_MAX_BYTES,
  TRACE_DATA_MAX_BYTES,
  TRACE_NAMES_MAX,
  TraceCommand,
  TraceCreatedDto,
  TraceRequestDto,
  TRACES_PER_MESSAGE_MAX,
} from './dto/trace-request.dto';
import {
  MessageTracesDto,
  TraceNamesDto,
  TraceNamesQueryDto,
  TracesByNameDto,
  TracesByNameQueryDto,
} from './dto/traces.dto';
import { TraceRequestPipe } from './trace-request.pipe';
import { TracesService } from './traces.service';
import { EXAMPLE_PARTITION_ID, EXAMPLE_TRANSACTION_ID } from '../common/api-examples';

@Injectable()
class PartitionIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (!isUuid(value)) throw contractException('partitionId must be a UUID');
    return value.toLowerCase();
  }
}

@ApiTags('traces')
@ApiBearerAuth()
@ApiAuthErrors("the token's roles do not open this route (record: read-write; reads: read-only)")
@RateLimited('manage')
@UseInterceptors(NoContentWhenEmptyInterceptor)
@Controller('api/v1/traces')
export class TracesController {
  constructor(private readonly service: TracesService) {}

  @Post()
  @Access('read-write')
  @RateLimited('consume')
  @ApiOperation({
    summary: 'Record a trace on a message',
    description:
      "A worker's note on the message it handles: an event type, JSON data and names to find it by across " +
      `messages. The message must exist in the caller's tenant. A message keeps at most ${TRACES_PER_MESSAGE_MAX} ` +
      'traces; they are deleted with it (a message delete, retention, a queue delete or clear, a move to the ' +
      'dead-letter queue). Traces do not count toward the storage quotas.',
  })
  @ApiBody({
    type: TraceRequestDto,
    examples: {
      trace: {
        summary: 'A step of order 42',
        value: {
          transactionId: EXAMPLE_TRANSACTION_ID,
          partitionId: EXAMPLE_PARTITION_ID,
          consumerGroup: 'billing',
          eventType: 'info',
          traceNames: ['order-42'],
          data: { step: 'charged', amount: 99.5 },
        },
      },
    },
  })
  @ApiCreatedResponse({ type: TraceCreatedDto })
  @ApiErrorResponse(
    400,
    'A required field is missing, or a field is invalid (the error names it); nothing is stored',
    'transactionId and partitionId are required',
    'data is required',
    'partitionId must be a UUID',
    `traceNames must hold at most ${TRACE_NAMES_MAX} names`,
  )
  @ApiErrorResponse(404, "No such message in this partition of the caller's tenant", 'message not found')
  @ApiErrorResponse(
    409,
    `The message already has ${TRACES_PER_MESSAGE_MAX} traces; nothing is stored`,
    `a message keeps at most ${TRACES_PER_MESSAGE_MAX} traces`,
  )
  @AcceptsBody(TRACE_BODY_MAX_BYTES, JSON_BODY_ELEMENTS, {
    when: `data is larger than ${TRACE_DATA_MAX_BYTES} bytes as JSON text`,
    error: `data is larger than ${TRACE_DATA_MAX_BYTES} bytes (20480)`,
  })
  @ApiDatabaseErrors('The trace may or may not have been recorded.')
  record(
    @TenantId() tenantId: string,
    @Body(TraceRequestPipe) command: TraceCommand,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<TraceCreatedDto> {
    return this.service.record(tenantId, command);
  }

  // Before :partitionId/:transactionId, which would take by-name for a partition id.
  @Get('by-name/:name')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: 'Traces recorded under a name, across messages, newest first',
    description:
      'Each with where it was recorded and its message payload. Paged by limit and offset (Queen) or, at any depth, ' +
      'by pagination.next passed as after; a page stops short of limit when it would pass RESPONSE_MAX_BYTES.',
  })
  @ApiQuery({ type: TracesByNameQueryDto })
  @ApiOkResponse({ type: TracesByNameDto })
  @ApiErrorResponse(
    400,
    'Invalid name or query parameter',
    'limit must be an integer between 1 and 1000',
    'after is not a page cursor',
  )
  @ApiDatabaseErrors('Nothing was changed.')
  byName(
    @TenantId() tenantId: string,
    @Param('name', new NamePipe('name')) name: string,
    @Query(new QueryDtoPipe(TracesByNameQueryDto)) query: TracesByNameQueryDto,
  ): Promise<JsonText> {
    return this.service.byName(tenantId, name, query);
  }

  @Get('names')
  @Access('read-only')
  @ApiOperation({
    summary: "The tenant's trace names, most recently seen first",
    description: 'Each with its traces, the messages they were recorded on and its newest trace.',
  })
  @ApiQuery({ type: TraceNamesQueryDto })
  @ApiOkResponse({ type: TraceNamesDto })
  @ApiErrorResponse(400, 'Invalid query parameter', 'limit must be an integer between 1 and 1000')
  @ApiDatabaseErrors('Nothing was changed.')
  names(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(TraceNamesQueryDto)) query: TraceNamesQueryDto,
  ): Promise<TraceNamesDto> {
    return this.service.names(tenantId, query);
  }

  @Get(':partitionId/:transactionId')
  @Access('read-only')
  @ApiOperation({
    summary: "A message's traces, oldest first",
    description: 'An unknown message, or one of another tenant, has none: the answer is the same empty list.',
  })
  @ApiOkResponse({ type: MessageTracesDto })
  @ApiErrorResponse(400, 'Invalid partition id or transaction id', 'partitionId must be a UUID')
  @ApiDatabaseErrors('Nothing was changed.')
  ofMessage(
    @TenantId() tenantId: string,
    @Param('partitionId', PartitionIdPipe) partitionId: string,
    @Param('transactionId', new NamePipe('transactionId')) transactionId: string,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<JsonText> {
    return this.service.ofMessage(tenantId, partitionId, transactionId);
  }
}
