import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { Client } from 'pg';
import { DatabaseTimeoutError } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { requestBoundMs } from '../database/deadline';
import { DatabaseServer } from '../database/database-server';
import { connectSession } from '../database/session-settings';

/** However many callers ask, the database is asked at most once per this interval. */
export const PROBE_INTERVAL_MS = 1_000;

interface Outcome {
  at: number;
  error: Error | undefined;
}

/** A connection of its own: no tenant's work can take it, and a flood of probes cannot take the pool's. */
@Injectable()
export class DatabaseProbe implements OnApplicationShutdown {
  private readonly boundMs: number;
  private client: Client | undefined;
  private last: Outcome | undefined;
  private running: Promise<Outcome> | undefined;
  private roundTrips = 0;

  constructor(
    private readonly server: DatabaseServer,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.boundMs = requestBoundMs(config.database);
  }

  get made(): number {
    return this.roundTrips;
  }

  async check(): Promise<void> {
    const fresh = this.last && performance.now() - this.last.at < PROBE_INTERVAL_MS ? this.last : undefined;
    const outcome = fresh ?? (await (this.running ??= this.probe().finally(() => (this.running = undefined))));
    if (outcome.error) throw outcome.error;
  }

  async onApplicationShutdown(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async probe(): Promise<Outcome> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.drop();
        reject(new DatabaseTimeoutError(this.boundMs));
      }, this.boundMs);
    });
    let error: Error | undefined;
    try {
      await Promise.race([this.roundTrip(), timeout]);
    } catch (failure) {
      // Kept as thrown (its code tells a refused connection from a timeout), even from another realm's Error.
      error = typeof failure === 'object' && failure !== null ? (failure as Error) : new Error(String(failure));
    } finally {
      clearTimeout(timer);
    }
    this.last = { at: performance.now(), error };
    return this.last;
  }

  /** A connection kept from an earlier probe may have died meanwhile (a restart): one more try on a new one. */
  private async roundTrip(): Promise<void> {
    const reused = this.client !== undefined;
    try {
      await this.query();
    } catch (error) {
      this.drop();
      if (!reused) throw error;
      await this.query();
    }
  }

  private async query(): Promise<void> {
    this.roundTrips += 1;
    if (!this.client) {
      const client = new Client({
        connectionString: await this.server.url(),
        connectionTimeoutMillis: this.config.database.acquireTimeoutMs,
        keepAlive: true,
        application_name: 'leasehold-probe',
      });
      client.on('error', () => this.drop(client));
      this.client = client;
      await connectSession(client);
    }
    await this.client.query('SELECT 1');
  }

  private drop(client: Client | undefined = this.client): void {
    if (!client) return;
    if (this.client === client) this.client = undefined;
    client.end().catch(() => undefined);
  }
}
