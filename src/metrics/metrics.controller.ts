import { Controller, Get, Headers, Inject, NotFoundException, Res, UnauthorizedException } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { Access } from '../auth/access.decorator';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { bearerMatches } from './metrics-token';
import { MetricsExposition } from './metrics-exposition';

/** Its series span tenants, so it takes METRICS_TOKEN, never a tenant's JWT; with auth on and no token, not served. */
@ApiExcludeController()
@Controller('metrics')
export class MetricsController {
  private readonly served: boolean;
  private readonly token: string | undefined;

  constructor(
    private readonly exposition: MetricsExposition,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    const { enabled, port, token } = config.metrics;
    this.served = enabled && port === undefined && (!config.jwt.enabled || token !== undefined);
    this.token = token;
  }

  @Get()
  @Access('public')
  async scrape(@Headers('authorization') authorization: string | undefined, @Res() response: Response): Promise<void> {
    if (!this.served) throw new NotFoundException({ error: 'not found' });
    if (this.token !== undefined && !bearerMatches(authorization, this.token)) {
      response.setHeader('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException({ error: 'Authentication required' });
    }
    const text = await this.exposition.render();
    response.setHeader('content-type', this.exposition.contentType);
    response.end(text);
  }
}
