import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseEngine } from '../database/database-engine';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { deploymentShare } from '../limits/deployment-share';
import { BrokersRepository } from './brokers.repository';
import { errorMessage } from '../common/error-message';

/** A row not renewed for this many heartbeats is a broker that is gone. */
export const LIVE_FOR_HEARTBEATS = 3;
/** Rows dead this long are deleted; until then an operator can still see a broker that died. */
const FORGET_AFTER_MS = 3_600_000;

/**
 * Counts the broker processes of the deployment, so that each enforces only
 * its share of a per-tenant limit (deploymentShare). Every
 * BROKER_HEARTBEAT_MS this process renews its row in the brokers table and
 * reads how many rows are live: one short statement on the pool, outside
 * every tenant's share, so no request waits on it and no request makes a
 * round trip for it. A heartbeat that fails keeps the last count (the
 * brokers most likely did not change while the database was away); before
 * the first one answers, the count is 1. On the embedded database (one
 * process) or with the heartbeat off, it stays 1. A broker that stops
 * deletes its row, so the others take back its share at their next
 * heartbeat; one that dies is counted until its row goes stale.
 */
@Injectable()
export class BrokerRegistry implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Brokers');
  readonly brokerId = randomUUID();
  private readonly intervalMs: number;
  private live = 1;
  private failing = false;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly brokers: BrokersRepository,
    private readonly engine: DatabaseEngine,
    drain: DrainService,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.intervalMs = config.brokerHeartbeatMs;
    // A draining broker takes no new requests: its share is the others' from now on.
    drain.onDrain(() => void this.stop());
  }

  /** Live broker processes as last counted, this one included; at least 1. */
  get liveBrokers(): number {
    return this.live;
  }

  /** This process's share of a per-tenant limit meant for the whole deployment. */
  share(limit: number): number {
    return deploymentShare(limit, this.live);
  }

  /** The first count is awaited, so a broker that starts among others never enforces the whole limit. */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.registers) return;
    await this.beat();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  private get registers(): boolean {
    return this.intervalMs > 0 && !this.engine.isEmbedded;
  }

  private beat(): Promise<void> {
    this.beating = this.transactions
      .run(undefined, (manager) =>
        this.brokers.beat(this.brokerId, this.intervalMs * LIVE_FOR_HEARTBEATS, FORGET_AFTER_MS, manager),
      )
      .then(
        (live) => {
          if (this.failing) this.logger.log(`Heartbeat answered again: ${live} brokers live`);
          else if (live !== this.live) this.logger.log(`${live} brokers live`);
          this.failing = false;
          this.live = live;
        },
        (error: unknown) => {
          if (!this.failing) {
            this.logger.warn(`Heartbeat failed, keeping the count of ${this.live} brokers: ${errorMessage(error)}`);
          }
          this.failing = true;
        },
      )
      .finally(() => {
        this.beating = undefined;
        if (!this.stopping) this.timer = setTimeout(() => void this.beat(), this.intervalMs).unref();
      });
    return this.beating;
  }

  /** Idempotent: no heartbeat after it, and the row deleted (best effort: otherwise it goes stale). */
  private stop(): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.timer);
      if (!this.registers) return;
      await this.beating;
      await this.transactions
        .run(undefined, (manager) => this.brokers.leave(this.brokerId, manager))
        .catch((error: unknown) => this.logger.warn(`Could not leave the brokers table: ${errorMessage(error)}`));
    })();
    return this.stopping;
  }
}
