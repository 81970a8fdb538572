import { HttpStatus, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RetryLaterException } from '../common/retry-later.exception';
import { DatabaseEngine } from '../database/database-engine';
import { TransactionRunner } from '../database/transaction-runner';
import { errorMessage } from '../common/error-message';
import { MaintenanceRepository } from './maintenance.repository';

export interface MaintenanceState {
  maintenanceMode: boolean;
  popMaintenanceMode: boolean;
}

export const MAINTENANCE_REFRESH_MS = 1_000;
export const PUSHES_PAUSED = 'maintenance: pushes are paused';
const PUSH_RETRY_AFTER_SECONDS = 5;

/**
 * Paused pushes are refused with 503 and Retry-After, so nothing is taken that could be lost. The switches live in the
 * database so every broker process honours them; the hot paths only look in a map.
 */
@Injectable()
export class MaintenanceService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Maintenance');
  private pushesPaused = new Set<string>();
  private popsPaused = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  /** Bumped by every switch this process reads or sets: a refresh begun before one is stale. */
  private version = 0;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly engine: DatabaseEngine,
    private readonly switches: MaintenanceRepository,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.refresh();
    // The embedded database serves one broker process, which sets every switch itself.
    if (this.engine.isEmbedded) return;
    this.timer = setInterval(() => {
      this.refreshing ??= this.refresh().finally(() => (this.refreshing = undefined));
    }, MAINTENANCE_REFRESH_MS).unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.refreshing;
  }

  assertPushesAllowed(tenantId: string): void {
    if (this.pushesPaused.has(tenantId)) {
      throw new RetryLaterException(HttpStatus.SERVICE_UNAVAILABLE, PUSHES_PAUSED, PUSH_RETRY_AFTER_SECONDS);
    }
  }

  popsArePaused(tenantId: string): boolean {
    return this.popsPaused.has(tenantId);
  }

  async state(tenantId: string): Promise<MaintenanceState> {
    const { pushesPaused, popsPaused } = await this.transactions.runOne(tenantId, this.switches.switches(tenantId));
    const state = { maintenanceMode: pushesPaused, popMaintenanceMode: popsPaused };
    this.remember(tenantId, state);
    return state;
  }

  async set(tenantId: string, switches: { pushes?: boolean; pops?: boolean }): Promise<MaintenanceState> {
    const { pushesPaused, popsPaused } = await this.transactions.runOne(
      tenantId,
      this.switches.set(tenantId, switches),
    );
    const state = { maintenanceMode: pushesPaused, popMaintenanceMode: popsPaused };
    this.remember(tenantId, state);
    this.logger.log(
      `Tenant ${tenantId}: pushes ${state.maintenanceMode ? 'paused' : 'allowed'}, ` +
        `pops ${state.popMaintenanceMode ? 'paused' : 'allowed'}`,
    );
    return state;
  }

  private remember(tenantId: string, state: MaintenanceState): void {
    this.version += 1;
    toggle(this.pushesPaused, tenantId, state.maintenanceMode);
    toggle(this.popsPaused, tenantId, state.popMaintenanceMode);
  }

  /** A failed read keeps the switches last seen: a database outage neither starts nor ends maintenance. */
  private async refresh(): Promise<void> {
    const version = this.version;
    try {
      const paused = await this.transactions.runOne(undefined, this.switches.paused());
      if (version !== this.version) return;
      this.pushesPaused = new Set(paused.filter((tenant) => tenant.pushesPaused).map((tenant) => tenant.tenantId));
      this.popsPaused = new Set(paused.filter((tenant) => tenant.popsPaused).map((tenant) => tenant.tenantId));
    } catch (error) {
      this.logger.warn(`Could not read the maintenance switches: ${errorMessage(error)}`);
    }
  }
}

function toggle(set: Set<string>, key: string, on: boolean): void {
  if (on) set.add(key);
  else set.delete(key);
}
