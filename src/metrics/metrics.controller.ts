import { timingSafeEqual } from 'node:crypto';
import { Controller, Get, Headers, Inject, NotFoundException, Res, UnauthorizedException } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { Access } from '../auth/access.decorator';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { MetricsService } from './metrics.service';

/**
 * `GET /metrics` on the API port, for Prometheus. Its series span tenants
 * (queue names, depths), so with auth on it needs METRICS_TOKEN as a bearer
 * token, not a tenant's JWT; with auth on and no METRICS_TOKEN, or with
 * METRICS_PORT set (a port of its own, kept off the public network), it is
 * not served here at all.
 */
@ApiExcludeController()
@Controller('metrics')
export class MetricsController {
  private readonly served: boolean;
  private readonly token: Buffer | undefined;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    const { enabled, port, token } = config.metrics;
    this.served = enabled && port === undefined && (!config.jwt.enabled || token !== undefined);
    this.token = config.jwt.enabled && token !== undefined ? Buffer.from(token) : undefined;
  }

  @Get()
  @Access('public')
  async scrape(@Headers('authorization') authorization: string | undefined, @Res() response: Response): Promise<void> {
    if (!this.served) throw new NotFoundException({ error: 'not found' });
    if (this.token && !matches(authorization, this.token)) {
      response.setHeader('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException({ error: 'Authentication required' });
    }
    const text = await this.metrics.registry.metrics();
    response.setHeader('content-type', this.metrics.registry.contentType);
    response.end(text);
  }
}

function matches(authorization: string | undefined, token: Buffer): boolean {
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '');
  return given.length === token.length && timingSafeEqual(given, token);
}
