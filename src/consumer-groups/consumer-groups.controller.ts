import { Body, Controller, Delete, Get, HttpCode, HttpStatus, Param, Post, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { QueryDtoPipe } from '../common/dto-validation';
import { NamePipe } from '../common/name.pipe';
import { NOT_A_PAGE_CURSOR, sendNextPage } from '../common/page-token';
import { AcceptsBody } from '../http/body-limit.decorator';
import { RateLimited } from '../limits/route-class.decorator';
import { HeavyRead } from '../limits/heavy-read';
import { SeekRequestPipe } from './seek-request.pipe';
import { ConsumerGroupsService, SeekTarget } from './consumer-groups.service';
import {
  ConsumerGroupDetailQueryDto,
  ConsumerGroupListQueryDto,
  DeleteConsumerGroupQueryDto,
  LaggingQueryDto,
} from './dto/consumer-group-query.dto';
import {
  ConsumerGroupDetail,
  ConsumerGroupDetailDto,
  ConsumerGroupSummaryDto,
  DeleteConsumerGroupResponseDto,
  LaggingPartitionDto,
  SeekResponseDto,
} from './dto/consumer-group-response.dto';
import { SEEK_BODY_MAX_BYTES, SeekRequestDto } from './dto/seek-request.dto';
import { INT32_MAX } from '../common/input';

const SEEK_DESCRIPTION =
  'Body {"toEnd": true} moves the cursor past the last message (the group skips everything stored); ' +
  '{"timestamp": "<ISO-8601>"} moves it to just before the first message created at or after that instant, so ' +
  'those are delivered again (to the first kept message, when retention deleted older ones). A group that has ' +
  'never popped from the queue is created by the seek, positioned there. A live lease of the group on a moved ' +
  "partition ends and the partition's epoch increases: the old holder's acks are refused and its extends renew " +
  '0. Parked polls of the group wake for what the seek made claimable.';
const GROUP = new NamePipe('consumerGroup');
const QUEUE = new NamePipe('queue');
const PARTITION = new NamePipe('partition');

@ApiTags('consumer groups')
@ApiBearerAuth()
@ApiAuthErrors("the token's roles do not open this route (reads: read-only; seek: read-write; delete: admin)")
@RateLimited('manage')
@Controller('api/v1/consumer-groups')
export class ConsumerGroupsController {
  constructor(private readonly service: ConsumerGroupsService) {}

  @Get()
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: 'Consumer groups with their lag, one entry per (group, queue)',
    description:
      'By queue then group name. totalLag counts the messages stored that the group has not consumed; maxTimeLag ' +
      'is the age in seconds of the oldest of them (state Lagging from 60 seconds). Paged: a page that is not the ' +
      'last carries an X-Next-After header, to pass as after.',
  })
  @ApiQuery({ type: ConsumerGroupListQueryDto })
  @ApiOkResponse({ type: [ConsumerGroupSummaryDto] })
  @ApiErrorResponse(400, 'Invalid query parameter', 'limit must be an integer between 1 and 1000', NOT_A_PAGE_CURSOR)
  @ApiErrorResponse(404, 'The queue asked for does not exist in this tenant', 'queue not found')
  @ApiDatabaseErrors('Nothing was changed.')
  async list(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(ConsumerGroupListQueryDto)) query: ConsumerGroupListQueryDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<ConsumerGroupSummaryDto[]> {
    const page = await this.service.list(tenantId, query.queue, query.after, query.limit);
    sendNextPage(response, page.next);
    return page.entries;
  }

  @Get('lagging')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: 'Partitions where a group is behind by at least minLagSeconds, worst first',
    description:
      'One entry per (group, partition) whose oldest unconsumed message is at least that old. A page looks at a ' +
      'bounded number of the cursors that have something to read (by queue, group, and the longest unmoved first), ' +
      'and is sorted worst first; a page that is not the last, even an empty one, carries an X-Next-After header, ' +
      'to pass as after. A cursor that moves while the pages are read may show twice.',
  })
  @ApiQuery({ type: LaggingQueryDto })
  @ApiOkResponse({ type: [LaggingPartitionDto] })
  @ApiErrorResponse(
    400,
    'Invalid query parameter',
    `minLagSeconds must be an integer between 0 and ${INT32_MAX}`,
    NOT_A_PAGE_CURSOR,
  )
  @ApiDatabaseErrors('Nothing was changed.')
  async lagging(
    @TenantId() tenantId: string,
    @Query(new QueryDtoPipe(LaggingQueryDto)) query: LaggingQueryDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<LaggingPartitionDto[]> {
    const page = await this.service.lagging(tenantId, query.minLagSeconds, query.after, query.limit);
    sendNextPage(response, page.next);
    return page.entries;
  }

  @Get(':group')
  @HeavyRead()
  @Access('read-only')
  @ApiOperation({
    summary: "One group's position per queue and partition",
    description:
      'Keyed by queue name; per partition its cursor, offset and time lag, and whether a lease is live (never ' +
      'the lease id). At most limit partitions in all (default and most 1000), by queue then partition name; ' +
      'partitionCount tells how many a queue has, and a page that is not the last carries an X-Next-After header, ' +
      'to pass as after. An unknown group answers {}.',
  })
  @ApiQuery({ type: ConsumerGroupDetailQueryDto })
  @ApiOkResponse({ schema: ConsumerGroupDetailDto.schema })
  @ApiErrorResponse(400, 'Invalid group name or query parameter', 'consumerGroup must be 1 to 255 characters long')
  @ApiDatabaseErrors('Nothing was changed.')
  async detail(
    @TenantId() tenantId: string,
    @Param('group', GROUP) group: string,
    @Query(new QueryDtoPipe(ConsumerGroupDetailQueryDto)) query: ConsumerGroupDetailQueryDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<ConsumerGroupDetail> {
    const page = await this.service.detail(tenantId, group, query.queue, query.after, query.limit);
    sendNextPage(response, page.next);
    return page.entries[0];
  }

  @Delete(':group')
  @HttpCode(HttpStatus.OK)
  @Access('admin')
  @ApiOperation({
    summary: "Forget a group's position on every queue",
    description:
      'Its cursors and starting points go, and with them its live leases (their acks are refused, extends renew ' +
      '0). The next pop by that name starts afresh by its subscriptionMode. Idempotent: an unknown group answers ' +
      'deletedPartitions 0.',
  })
  @ApiQuery({ type: DeleteConsumerGroupQueryDto })
  @ApiOkResponse({ type: DeleteConsumerGroupResponseDto })
  @ApiErrorResponse(400, 'Invalid group name', 'consumerGroup must not contain control characters')
  @ApiDatabaseErrors('The group may or may not have been forgotten; delete is idempotent: send it again.')
  deleteEverywhere(
    @TenantId() tenantId: string,
    @Param('group', GROUP) group: string,
    @Query(new QueryDtoPipe(DeleteConsumerGroupQueryDto)) _query: DeleteConsumerGroupQueryDto,
  ): Promise<DeleteConsumerGroupResponseDto> {
    return this.service.delete(tenantId, group, undefined);
  }

  @Delete(':group/queues/:queue')
  @HttpCode(HttpStatus.OK)
  @Access('admin')
  @ApiOperation({
    summary: "Forget a group's position on one queue",
    description: 'As the delete on every queue, limited to this one; an unknown queue or group answers 0.',
  })
  @ApiQuery({ type: DeleteConsumerGroupQueryDto })
  @ApiOkResponse({ type: DeleteConsumerGroupResponseDto })
  @ApiErrorResponse(400, 'Invalid group or queue name', 'queue must be 1 to 255 characters long')
  @ApiDatabaseErrors('The group may or may not have been forgotten; delete is idempotent: send it again.')
  deleteOnQueue(
    @TenantId() tenantId: string,
    @Param('group', GROUP) group: string,
    @Param('queue', QUEUE) queue: string,
    @Query(new QueryDtoPipe(DeleteConsumerGroupQueryDto)) _query: DeleteConsumerGroupQueryDto,
  ): Promise<DeleteConsumerGroupResponseDto> {
    return this.service.delete(tenantId, group, queue);
  }

  @Post(':group/queues/:queue/seek')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Move a group on every partition of a queue', description: SEEK_DESCRIPTION })
  @ApiBody({ type: SeekRequestDto, examples: seekExamples() })
  @ApiOkResponse({ type: SeekResponseDto })
  @ApiErrorResponse(
    400,
    'Neither or both of toEnd and timestamp, or an invalid one; nothing is changed',
    'toEnd must be true, or a timestamp must be given',
    'timestamp must be an ISO-8601 timestamp',
  )
  @ApiErrorResponse(404, 'No such queue in this tenant', 'queue not found')
  @AcceptsBody(SEEK_BODY_MAX_BYTES)
  @ApiDatabaseErrors('The seek may or may not have been applied; it is idempotent: send it again.')
  seekQueue(
    @TenantId() tenantId: string,
    @Param('group', GROUP) group: string,
    @Param('queue', QUEUE) queue: string,
    @Body(SeekRequestPipe) target: SeekTarget,
  ): Promise<SeekResponseDto> {
    return this.service.seek(tenantId, group, queue, undefined, target);
  }

  @Post(':group/queues/:queue/partitions/:partition/seek')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({ summary: 'Move a group on one partition', description: SEEK_DESCRIPTION })
  @ApiBody({ type: SeekRequestDto, examples: seekExamples() })
  @ApiOkResponse({ type: SeekResponseDto })
  @ApiErrorResponse(
    400,
    'Neither or both of toEnd and timestamp, or an invalid one; nothing is changed',
    'toEnd and timestamp cannot both be given',
  )
  @ApiErrorResponse(404, 'No such queue or partition in this tenant', 'queue not found', 'partition not found')
  @AcceptsBody(SEEK_BODY_MAX_BYTES)
  @ApiDatabaseErrors('The seek may or may not have been applied; it is idempotent: send it again.')
  seekPartition(
    @TenantId() tenantId: string,
    @Param('group', GROUP) group: string,
    @Param('queue', QUEUE) queue: string,
    @Param('partition', PARTITION) partition: string,
    @Body(SeekRequestPipe) target: SeekTarget,
  ): Promise<SeekResponseDto> {
    return this.service.seek(tenantId, group, queue, partition, target);
  }
}

function seekExamples() {
  return {
    toEnd: { summary: 'Skip everything stored', value: { toEnd: true } },
    timestamp: { summary: 'Replay from an instant', value: { timestamp: '2026-07-30T10:00:00Z' } },
  };
}
