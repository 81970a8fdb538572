import {
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpStatus,
  Injectable,
  Param,
  PipeTransform,
  Post,
  Query,
  UseInterceptors,
} from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { PURGE_LEVEL } from '../auth/access-level';
import { STORAGE_QUOTA_REFUSALS } from '../limits/tenant-quotas';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { contractException, NoQueryParameters, QueryDtoPipe } from '../common/dto-validation';
import { JsonText } from '../common/json-text';
import { NamePipe } from '../common/name.pipe';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { isUuid } from '../common/uuid';
import { RateLimited } from '../limits/route-class.decorator';
import { HeavyRead } from '../limits/heavy-read';
import {
  ClearQueryDto,
  ClearQueueResponseDto,
  ConsumerGroupQueryDto,
  DeleteMessageResponseDto,
  MessageDetailDto,
  MessageListQueryDto,
  MessagePageDto,
  MoveToDeadLettersResponseDto,
  RetryMessageResponseDto,
} from './dto/messages.dto';
import { MessagesService } from './messages.service';

@Injectable()
class PartitionIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (!isUuid(value)) throw contractException('partitionId must be a UUID');
    return value.toLowerCase();
  }
}

const TRANSACTION_ID = new NamePipe('transactionId');
const NOT_FOUND = 'No such message (nor dead letter of it) in this partition of this tenant';

@ApiTags('messages')
@ApiBearerAuth()
@ApiAuthErrors("the token's roles do not open this route (reads: read-only; delete, retry: read-write; clear: admin)")
@RateLimited('manage')
@UseInterceptors(NoContentWhenEmptyInterceptor)
@Controller('api/v1')
export class MessagesController {
  constructor(private readonly service: MessagesService) {}

  @Get('messages')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: "Browse a queue's messages, newest first",
    description:
      'Each with the fields a pop hands out (leaseId always null: lease ids are never shown to readers) and its ' +
      'status for consumerGroup (queue mode by default). Paged by next/after, and a page stops short of limit ' +
      'when it would pass RESPONSE_MAX_BYTES. Messages retention deleted are not listed.',
  })
  @ApiQuery({ type: MessageListQueryDto })
  @ApiOkResponse({ type: MessagePageDto })
  @ApiErrorResponse(
    400,
    'A query parameter is invalid',
    'queue is required',
    'status must be one of pending, leased, completed, dead_letter',
    'after is not a page cursor',
  )
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @ApiDatabaseErrors('Nothing was changed.')
  list(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(MessageListQueryDto)) query: MessageListQueryDto,
  ): Promise<JsonText> {
    return this.service.list(tenantId, query);
  }

  @Get('messages/:partitionId/:transactionId')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: 'One message, with its state in every consumer group and its dead letters',
    description: 'Lease ids are never shown.',
  })
  @ApiOkResponse({ type: MessageDetailDto })
  @ApiErrorResponse(400, 'Invalid partition id', 'partitionId must be a UUID')
  @ApiErrorResponse(404, NOT_FOUND, 'message not found')
  @ApiDatabaseErrors('Nothing was changed.')
  detail(
    @TenantId() tenantId: string,
    @Param('partitionId', PartitionIdPipe) partitionId: string,
    @Param('transactionId', TRANSACTION_ID) transactionId: string,
  ): Promise<JsonText> {
    return this.service.detail(tenantId, partitionId, transactionId);
  }

  @Delete('messages/:partitionId/:transactionId')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Delete a message and its dead letters',
    description:
      'Refused with 409 while a live lease of any group covers it (nothing changes): ack, nack or let the lease ' +
      'end first. Deletes the dead letters alone when retention already deleted the message. Consumers skip it.',
  })
  @ApiOkResponse({ type: DeleteMessageResponseDto })
  @ApiErrorResponse(400, 'Invalid partition id', 'partitionId must be a UUID')
  @ApiErrorResponse(404, NOT_FOUND, 'message not found')
  @ApiErrorResponse(409, 'A live lease covers the message; nothing changed', 'message is under a live lease')
  @ApiDatabaseErrors('The message may or may not have been deleted: send it again (404 then means it was).')
  delete(
    @TenantId() tenantId: string,
    @Param('partitionId', PartitionIdPipe) partitionId: string,
    @Param('transactionId', TRANSACTION_ID) transactionId: string,
    @Query(new QueryDtoPipe(NoQueryParameters)) _query: NoQueryParameters,
  ): Promise<DeleteMessageResponseDto> {
    return this.service.delete(tenantId, partitionId, transactionId);
  }

  @Post('messages/:partitionId/:transactionId/retry')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Retry a dead letter',
    description:
      'Pushes its message again to the tail of its partition as transactionId dlq:<original> (every group ' +
      'of the queue gets it, and a parked poll wakes for it) and removes the dead letters, of consumerGroup ' +
      'only when given, in the same transaction. Once: a second retry finds no dead letter (404).',
  })
  @ApiQuery({ type: ConsumerGroupQueryDto })
  @ApiOkResponse({ type: RetryMessageResponseDto })
  @ApiErrorResponse(400, 'Invalid partition id', 'partitionId must be a UUID')
  @ApiErrorResponse(404, 'No dead letter of this message in this tenant', 'dead letter not found')
  @ApiErrorResponse(409, 'The queue is at its maxSize; nothing changed', 'queue is full')
  @ApiAuthErrors('the token has no read-write or admin role', ...STORAGE_QUOTA_REFUSALS)
  @ApiDatabaseErrors('The retry may or may not have happened: send it again (404 then means it did).')
  retry(
    @TenantId() tenantId: string,
    @Param('partitionId', PartitionIdPipe) partitionId: string,
    @Param('transactionId', TRANSACTION_ID) transactionId: string,
    @Query(new QueryDtoPipe(ConsumerGroupQueryDto)) { consumerGroup }: ConsumerGroupQueryDto,
  ): Promise<RetryMessageResponseDto> {
    return this.service.retry(tenantId, partitionId, transactionId, consumerGroup);
  }

  @Post('messages/:partitionId/:transactionId/dlq')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Move a message to the dead-letter queue',
    description:
      'Takes a poison message out of its partition (every group skips it) and keeps it as a dead letter of ' +
      'consumerGroup (queue mode by default), with errorMessage "moved to the dead-letter queue by an operator", ' +
      'in one transaction. Refused with 409 while a live lease covers it. Retry brings it back.',
  })
  @ApiQuery({ type: ConsumerGroupQueryDto })
  @ApiOkResponse({ type: MoveToDeadLettersResponseDto })
  @ApiErrorResponse(400, 'Invalid partition id', 'partitionId must be a UUID')
  @ApiErrorResponse(404, 'No such message in this partition of this tenant', 'message not found')
  @ApiErrorResponse(409, 'A live lease covers the message; nothing changed', 'message is under a live lease')
  @ApiDatabaseErrors('The move may or may not have happened: send it again (404 then means it did).')
  moveToDeadLetters(
    @TenantId() tenantId: string,
    @Param('partitionId', PartitionIdPipe) partitionId: string,
    @Param('transactionId', TRANSACTION_ID) transactionId: string,
    @Query(new QueryDtoPipe(ConsumerGroupQueryDto)) { consumerGroup }: ConsumerGroupQueryDto,
  ): Promise<MoveToDeadLettersResponseDto> {
    return this.service.moveToDeadLetters(tenantId, partitionId, transactionId, consumerGroup);
  }

  @Delete('queues/:queue/clear')
  @HttpCode(HttpStatus.OK)
  @Access(PURGE_LEVEL)
  @ApiOperation({
    summary: "Clear a queue's messages (or one partition's)",
    description:
      'Deletes them and moves every consumer group to the end there, in one transaction; the groups keep their ' +
      'names and settings, live leases end (their acks are refused, extends renew 0). Dead letters stay. One ' +
      'statement: a queue too large to clear within DB_STATEMENT_TIMEOUT_MS is left as it was (seek its groups ' +
      'to the end instead, and let retention delete).',
  })
  @ApiQuery({ type: ClearQueryDto })
  @ApiOkResponse({ type: ClearQueueResponseDto })
  @ApiErrorResponse(400, 'Invalid queue or partition name', 'queue must be 1 to 255 characters long')
  @ApiErrorResponse(404, 'No such queue or partition in this tenant', 'queue not found', 'partition not found')
  @ApiDatabaseErrors('The queue may or may not have been cleared: send it again.')
  clear(
    @TenantId() tenantId: string,
    @Param('queue', new NamePipe('queue')) queue: string,
    @Query(new QueryDtoPipe(ClearQueryDto)) { partition }: ClearQueryDto,
  ): Promise<ClearQueueResponseDto> {
    return this.service.clear(tenantId, queue, partition);
  }
}
