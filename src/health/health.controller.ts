import { Controller, Get, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { Access } from '../auth/access.decorator';
import { ApiErrorResponse } from '../common/api-errors.decorator';
import { ProbeService } from './probe.service';

/** The probes as routes, for Swagger and the router; ProbeService.middleware answers them first. */
@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly probes: ProbeService) {}

  private async answer(path: string, response: Response): Promise<unknown> {
    const { status, body } = await this.probes.answer(path)!;
    response.status(status);
    return body;
  }

  @Get()
  @Access('public')
  @ApiOperation({
    summary: 'Liveness with a database round trip (kept for existing clients; see /health/live and /health/ready)',
    description: "The readiness probe's round trip: a connection of its own, at most once a second however many ask.",
  })
  @ApiOkResponse({ description: 'The database answered', schema: { example: { status: 'ok', database: 'up' } } })
  @ApiErrorResponse(503, 'The database could not be reached', 'database unavailable')
  check(@Res({ passthrough: true }) response: Response): Promise<unknown> {
    return this.answer('/health', response);
  }

  @Get('live')
  @Access('public')
  @ApiOperation({
    summary: 'Liveness: the process is up and serving HTTP',
    description:
      'Touches nothing else, so a database outage never gets a broker restarted. Answers 200 while draining, too.',
  })
  @ApiOkResponse({ schema: { example: { status: 'ok', info: {}, error: {}, details: {} } } })
  live(@Res({ passthrough: true }) response: Response): Promise<unknown> {
    return this.answer('/health/live', response);
  }

  @Get('ready')
  @Access('public')
  @ApiOperation({
    summary: 'Readiness: send this broker work?',
    description:
      'Ready when the database answers a round trip, every migration is applied, and the broker is not shutting down. ' +
      'Turns 503 the moment shutdown begins, so a load balancer stops sending work while requests in flight finish.',
  })
  @ApiOkResponse({
    schema: {
      example: {
        status: 'ok',
        info: { database: { status: 'up' }, migrations: { status: 'up' }, shutdown: { status: 'up' } },
        error: {},
        details: { database: { status: 'up' }, migrations: { status: 'up' }, shutdown: { status: 'up' } },
      },
    },
  })
  @ApiServiceUnavailableResponse({
    description: 'Not ready: `error` names the failing checks, the other keys are those of a healthy answer',
    schema: {
      example: {
        status: 'error',
        info: { migrations: { status: 'up' }, shutdown: { status: 'up' } },
        details: {
          database: { status: 'down', message: 'pool' },
          migrations: { status: 'up' },
          shutdown: { status: 'up' },
        },
        error: 'not ready: database',
      },
    },
  })
  ready(@Res({ passthrough: true }) response: Response): Promise<unknown> {
    return this.answer('/health/ready', response);
  }
}
