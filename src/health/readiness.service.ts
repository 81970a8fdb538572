import { Injectable, Logger, OnApplicationBootstrap, ServiceUnavailableException } from '@nestjs/common';
import { HealthCheckResult, HealthCheckService, HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { DrainService } from '../lifecycle/drain.service';
import { DatabaseProbe } from './database-probe';
import { Database } from '../database/database';
import { migrationsUpToDate } from '../database/run-migrations';
import { errorMessage } from '../common/error-message';
import { databaseFailureOf, databaseFailureText } from '../common/database-errors';

export interface ReadinessReport {
  status: 200 | 503;
  body: HealthCheckResult | (Omit<HealthCheckResult, 'error'> & { error: string });
}

@Injectable()
export class ReadinessService implements OnApplicationBootstrap {
  private readonly logger = new Logger('Health');
  private migrated = false;
  private lastLogged: unknown;

  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly probe: DatabaseProbe,
    private readonly pool: Database,
    private readonly drain: DrainService,
  ) {}

  /** Migrations ran before the application started; learn that now, while the database is surely up. */
  async onApplicationBootstrap(): Promise<void> {
    await this.migrations();
  }

  async report(): Promise<ReadinessReport> {
    try {
      return {
        status: 200,
        body: await this.health.check([() => this.database(), () => this.migrations(), () => this.shutdown()]),
      };
    } catch (error) {
      if (!(error instanceof ServiceUnavailableException)) throw error;
      const result = error.getResponse() as HealthCheckResult;
      // Terminus's own `error` object repeats what `details` says; the contract wants a text there.
      return { status: 503, body: { ...result, error: `not ready: ${Object.keys(result.error ?? {}).join(', ')}` } };
    }
  }

  /** The shared, bounded probe (DatabaseProbe): a stalled database is "down" within the bounds, not a hang. */
  async database(): Promise<HealthIndicatorResult> {
    const check = this.indicators.check('database');
    try {
      await this.probe.check();
      return check.up();
    } catch (error) {
      return check.down({ message: this.failure(error) });
    }
  }

  /** No migration left to apply; once true, not asked again (migrations only run at start-up). */
  async migrations(): Promise<HealthIndicatorResult> {
    const check = this.indicators.check('migrations');
    if (!this.migrated) {
      try {
        this.migrated = await migrationsUpToDate(this.pool);
      } catch (error) {
        return check.down({ message: this.failure(error) });
      }
    }
    return this.migrated ? check.up() : check.down({ message: 'migrations pending' });
  }

  /**
   * The probes are public: the answer names the kind of failure, never the database's text (hosts, roles); that goes
   * to the log, once per probe outcome however many ask.
   */
  private failure(error: unknown): string {
    if (error !== this.lastLogged) {
      this.lastLogged = error;
      this.logger.warn(`readiness check failed: ${errorMessage(error)}`);
    }
    const failure = databaseFailureOf(error);
    return failure === undefined ? 'database error' : databaseFailureText(failure);
  }

  shutdown(): HealthIndicatorResult {
    const check = this.indicators.check('shutdown');
    return this.drain.draining ? check.down({ message: 'draining' }) : check.up();
  }
}
