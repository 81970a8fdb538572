import { HttpStatus, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RetryLaterException } from '../common/retry-later.exception';
import { DatabaseEngine } from '../database/database-engine';
import { TransactionRunner } from '../database/transaction-runner';
import { errorMessage } from '../common/error-message';

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
    const rows: Array<{ pushes_paused: boolean; pops_paused: boolean }> = await this.transactions.run(
      tenantId,
      (manager) => manager.query('SELECT pushes_paused, pops_paused FROM maintenance WHERE tenant_id = $1', [tenantId]),
    );
    const state = {
      maintenanceMode: rows[0]?.pushes_paused ?? false,
      popMaintenanceMode: rows[0]?.pops_paused ?? false,
    };
    this.remember(tenantId, state);
    return state;
  }

  async set(tenantId: string, switches: { pushes?: boolean; pops?: boolean }): Promise<MaintenanceState> {
    const [row]: Array<{ pushes_paused: boolean; pops_paused: boolean }> = await this.transactions.run(
      tenantId,
      (manager) =>
        manager.query(
          `INSERT INTO maintenance AS m (tenant_id, pushes_paused, pops_paused)
           VALUES ($1, COALESCE($2, false), COALESCE($3, false))
           ON CONFLICT (tenant_id) DO UPDATE
              SET pushes_paused = COALESCE($2, m.pushes_paused), pops_paused = COALESCE($3, m.pops_paused),
                  updated_at = now()
           RETURNING pushes_paused, pops_paused`,
          [tenantId, switches.pushes ?? null, switches.pops ?? null],
        ),
    );
    const state = { maintenanceMode: row.pushes_paused, popMaintenanceMode: row.pops_paused };
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
      const rows: Array<{ tenant_id: string; pushes_paused: boolean; pops_paused: boolean }> =
        await this.transactions.run(undefined, (manager) =>
          manager.query(
            'SELECT tenant_id, pushes_paused, pops_paused FROM maintenance WHERE pushes_paused OR pops_paused',
          ),
        );
      if (version !== this.version) return;
      this.pushesPaused = new Set(rows.filter((row) => row.pushes_paused).map((row) => row.tenant_id));
      this.popsPaused = new Set(rows.filter((row) => row.pops_paused).map((row) => row.tenant_id));
    } catch (error) {
      this.logger.warn(`Could not read the maintenance switches: ${errorMessage(error)}`);
    }
  }
}

function toggle(set: Set<string>, key: string, on: boolean): void {
  if (on) set.add(key);
  else set.delete(key);
}
