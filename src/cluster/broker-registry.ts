import { randomUUID } from 'node:crypto';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { DatabaseEngine } from '../database/database-engine';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { deploymentShare } from '../limits/deployment-share';
import { BrokersRepository } from './brokers.repository';
import { errorMessage } from '../common/error-message';

export const LIVE_FOR_HEARTBEATS = 3;
/** Rows dead this long are deleted; until then an operator can still see a broker that died. */
const FORGET_AFTER_MS = 3_600_000;

/** A failed heartbeat keeps the last count: the brokers most likely did not change while the database was away. */
@Injectable()
export class BrokerRegistry implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Brokers');
  readonly brokerId = randomUUID();
  private readonly intervalMs: number;
  private live = 1;
  private counted = false;
  private failing = false;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private readonly listeners: Array<(live: number) => void> = [];

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

  get liveBrokers(): number {
    return this.live;
  }

  /** Told the count at every heartbeat that changes it, the first one included. */
  onCount(listener: (live: number) => void): void {
    this.listeners.push(listener);
  }

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
      .runOne(undefined, this.brokers.beat(this.brokerId, this.intervalMs * LIVE_FOR_HEARTBEATS, FORGET_AFTER_MS))
      .then(
        (live) => {
          if (this.failing) this.logger.log(`Heartbeat answered again: ${live} brokers live`);
          else if (live !== this.live) this.logger.log(`${live} brokers live`);
          this.failing = false;
          const changed = live !== this.live || !this.counted;
          this.live = live;
          this.counted = true;
          if (changed) for (const listener of this.listeners) listener(live);
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

  private stop(): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.timer);
      if (!this.registers) return;
      await this.beating;
      await this.transactions
        .runOne(undefined, this.brokers.leave(this.brokerId))
        .catch((error: unknown) => this.logger.warn(`Could not leave the brokers table: ${errorMessage(error)}`));
    })();
    return this.stopping;
  }
}
