import { Injectable, Logger, ServiceUnavailableException } from '@nestjs/common';
import { DatabaseProbe } from './database-probe';

export interface HealthStatus {
  status: 'ok';
  database: 'up';
}

@Injectable()
export class HealthService {
  private readonly logger = new Logger(HealthService.name);

  constructor(private readonly probe: DatabaseProbe) {}

  async check(): Promise<HealthStatus> {
    try {
      await this.probe.check();
      return { status: 'ok', database: 'up' };
    } catch (error) {
      this.logger.warn(`health check failed: ${error instanceof Error ? error.message : String(error)}`);
      throw new ServiceUnavailableException({ error: 'database unavailable' });
    }
  }
}
