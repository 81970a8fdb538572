import { Controller, HttpCode, HttpStatus, Param, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { AcceptsBody } from '../http/body-limit.decorator';
import { FastRoute, KeepsUndecodable } from '../http/fast-route.decorator';
import { LenientSecondsPipe } from '../common/lenient-seconds.pipe';
import { RawRequestBody, ReadsOwnBody } from '../http/request-body.interceptor';
import { RateLimited } from '../limits/route-class.decorator';
import { ExtendLeaseRequestDto } from './dto/extend-lease-request.dto';
import { ExtendLeaseResponseDto } from './dto/extend-lease-response.dto';
import { LeaseService } from './lease.service';
import {
  DEADLINE_AFTER_HEADER,
  hintHeaders,
  LEASE_STATUS_HEADER,
  RENEW_AFTER_HEADER,
  RENEW_FRACTION,
  RENEW_JITTER,
} from './renewal-hints';

/** The body is `{"seconds": N}`: a few bytes, and nothing else in it is read. */
const LEASE_BODY_MAX_BYTES = 1024;

@ApiTags('lease')
@ApiBearerAuth()
@RateLimited('renew')
@Controller('api/v1/lease')
export class LeaseController {
  constructor(private readonly leaseService: LeaseService) {}

  @Post(':leaseId/extend')
  @FastRoute()
  // Not a UUID answers renewed 0 like any unknown id, never a 400 that would set it apart.
  @KeepsUndecodable('leaseId')
  @HttpCode(HttpStatus.OK)
  @Access('read-write')
  @ApiOperation({
    summary: 'Extend a lease while the handler is still working',
    description:
      'Pushes out the deadline of every live (partition, consumer group) lease held by this id, in the ' +
      "caller's tenant: new expiry = max(current expiry, now + seconds), by the database clock. Never " +
      'shortens a lease and never resurrects an expired one. The body is parsed leniently and this route ' +
      'never answers 400. HTTP 200 does not mean the lease was extended: read `renewed`. An unknown, ' +
      "expired, released or other tenant's id, or one that is not a UUID, answers 200 with success false, " +
      'renewed 0 and null timestamps, indistinguishably.',
  })
  @ApiParam({
    name: 'leaseId',
    description:
      'The leaseId the pop returned, minted by the broker: a UUIDv7 in its 36-character form, 8-4-4-4-12 ' +
      'hexadecimal digits. Any other value answers 200 with renewed 0.',
  })
  @ApiBody({
    type: ExtendLeaseRequestDto,
    required: false,
    examples: { extend: { summary: 'One more minute', value: { seconds: 60 } } },
  })
  @ApiOkResponse({
    type: ExtendLeaseResponseDto,
    description: 'The renewal ran, whether or not it renewed anything.',
    headers: {
      [RENEW_AFTER_HEADER]: {
        description:
          `When renewed > 0, or with Leasehold-Lease-Status busy: renew again after this many seconds (decimal, from this answer), ` +
          `${Math.round(RENEW_FRACTION * 100)}% of what the lease has left less up to ${RENEW_JITTER * 100}% of ` +
          'that at random, so that workers that popped together do not renew together. Absent when the lease ' +
          'stands at its ceiling and renewing again would extend nothing.',
        schema: { type: 'string', example: '9.871' },
      },
      [DEADLINE_AFTER_HEADER]: {
        description:
          'When renewed > 0 and the broker caps total lease length (LEASE_MAX_TOTAL_SECONDS): seconds (decimal, ' +
          'from this answer) until the hard end of the lease, fixed at its claim. No renewal extends it past that.',
        schema: { type: 'string', example: '84.120' },
      },
      [LEASE_STATUS_HEADER]: {
        description:
          "When renewed = 0: `expired` when the caller's own lease ran out unrenewed and has not been claimed " +
          "again; `unknown` otherwise (released by an ack or nack, re-claimed, never existed, or another tenant's). " +
          '`busy`, with renewed 0 or more: live rows of the lease were held by another transaction in progress (an ' +
          'ack or a transaction of this lease) and were left as they were instead of waited for; the lease is not ' +
          'lost. Renew again after Leasehold-Renew-After (at most 0.25 s).',
        schema: { type: 'string', enum: ['expired', 'unknown', 'busy'] },
      },
    },
  })
  @ApiAuthErrors('the token has no read-write or admin role')
  @AcceptsBody(LEASE_BODY_MAX_BYTES)
  @ApiErrorResponse(
    500,
    'No database connection within DB_ACQUIRE_TIMEOUT_MS, or the database could not be reached (`pool`); or the ' +
      'renewal failed (`renew failed: statement timeout` past DB_STATEMENT_TIMEOUT_MS, `renew failed: database ' +
      'timeout` when the database did not answer, `renew failed: database error` otherwise). Retrying is safe: ' +
      'a renewal never shortens a lease.',
    'pool',
    'renew failed: statement timeout',
    'renew failed: database timeout',
    'renew failed: database error',
  )
  @ReadsOwnBody()
  async extend(
    @TenantId() tenantId: string,
    @Param('leaseId') leaseId: string,
    @RawRequestBody(LenientSecondsPipe) seconds: number,
    @Res({ passthrough: true }) response: Response,
  ): Promise<ExtendLeaseResponseDto> {
    const { body, hints } = await this.leaseService.extend(tenantId, leaseId, seconds);
    for (const [name, value] of hintHeaders(hints)) response.setHeader(name, value);
    return body;
  }
}
