import { Injectable, Logger, ServiceUnavailableException } from '@nestjs/common';
import { TransactionRunner } from '../database/transaction-runner';

export interface HealthStatus {
  status: 'ok';
  database: 'up';
}

@Injectable()
export class HealthService {
  private readonly logger = new Logger(HealthService.name);

  constructor(private readonly transactions: TransactionRunner) {}

  /** A round trip under the same bounds as every request: a stalled database fails, it does not hang. */
  async roundTrip(): Promise<void> {
    await this.transactions.run(undefined, (manager) => manager.query('SELECT 1'));
  }

  async check(): Promise<HealthStatus> {
    try {
      await this.roundTrip();
      return { status: 'ok', database: 'up' };
    } catch (error) {
      this.logger.warn(`health check failed: ${error instanceof Error ? error.message : String(error)}`);
      throw new ServiceUnavailableException({ error: 'database unavailable' });
    }
  }
}
