import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { DrainService } from '../lifecycle/drain.service';
import { HealthService } from './health.service';

/** The checks behind GET /health/ready, as @nestjs/terminus indicators. */
@Injectable()
export class ReadinessService implements OnApplicationBootstrap {
  private migrated = false;

  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly health: HealthService,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly drain: DrainService,
  ) {}

  /** Migrations ran before the application started; learn that now, while the database is surely up. */
  async onApplicationBootstrap(): Promise<void> {
    await this.migrations();
  }

  /** The same bounded round trip as GET /health: a stalled database is "down" within the bounds, not a hang. */
  async database(): Promise<HealthIndicatorResult> {
    const check = this.indicators.check('database');
    try {
      await this.health.roundTrip();
      return check.up();
    } catch (error) {
      return check.down({ message: error instanceof Error ? error.message : String(error) });
    }
  }

  /** No migration left to apply; once true, not asked again (migrations only run at start-up). */
  async migrations(): Promise<HealthIndicatorResult> {
    const check = this.indicators.check('migrations');
    if (!this.migrated) {
      try {
        this.migrated = !(await this.dataSource.showMigrations());
      } catch (error) {
        return check.down({ message: error instanceof Error ? error.message : String(error) });
      }
    }
    return this.migrated ? check.up() : check.down({ message: 'migrations pending' });
  }

  shutdown(): HealthIndicatorResult {
    const check = this.indicators.check('shutdown');
    return this.drain.draining ? check.down({ message: 'draining' }) : check.up();
  }
}
