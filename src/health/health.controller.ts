import { Controller, Get, Res } from '@nestjs/common';
import { HealthCheckResult, HealthCheckService } from '@nestjs/terminus';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { Access } from '../auth/access.decorator';
import { ApiErrorResponse } from '../common/api-errors.decorator';
import { HealthService, HealthStatus } from './health.service';
import { ReadinessReport, ReadinessService } from './readiness.service';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly healthService: HealthService,
    private readonly health: HealthCheckService,
    private readonly readiness: ReadinessService,
  ) {}

  @Get()
  @Access('public')
  @ApiOperation({
    summary: 'Liveness with a database round trip (kept for existing clients; see /health/live and /health/ready)',
    description: "The readiness probe's round trip: a connection of its own, at most once a second however many ask.",
  })
  @ApiOkResponse({ description: 'The database answered', schema: { example: { status: 'ok', database: 'up' } } })
  @ApiErrorResponse(503, 'The database could not be reached', 'database unavailable')
  check(): Promise<HealthStatus> {
    return this.healthService.check();
  }

  @Get('live')
  @Access('public')
  @ApiOperation({
    summary: 'Liveness: the process is up and serving HTTP',
    description:
      'Touches nothing else, so a database outage never gets a broker restarted. Answers 200 while draining, too.',
  })
  @ApiOkResponse({ schema: { example: { status: 'ok', info: {}, error: {}, details: {} } } })
  live(): Promise<HealthCheckResult> {
    return this.health.check([]);
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
  async ready(@Res({ passthrough: true }) response: Response): Promise<ReadinessReport['body']> {
    const { status, body } = await this.readiness.report();
    response.status(status);
    return body;
  }
}
