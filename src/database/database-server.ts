import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { EmbeddedPostgres } from './embedded-postgres';

/**
 * Connections the embedded server takes beside the pool's: the wakeup LISTEN client, the migrations' lock client,
 * the readiness probe's and reachability check's own clients, and a few for psql while it runs.
 */
const EMBEDDED_SPARE_CONNECTIONS = 10;

@Injectable()
export class DatabaseServer {
  private readonly logger = new Logger(DatabaseServer.name);
  private embedded: EmbeddedPostgres | undefined;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async url(): Promise<string> {
    const { database } = this.config;
    if (database.url) {
      return database.url;
    }
    if (!this.embedded) {
      this.logger.log(
        EmbeddedPostgres.isNew(database.dataDir)
          ? `Creating the embedded PostgreSQL (PGlite) in ${database.dataDir}: first start, this takes a few seconds`
          : `Opening the embedded PostgreSQL (PGlite) in ${database.dataDir}`,
      );
      this.embedded = await EmbeddedPostgres.start({
        dataDir: database.dataDir,
        maxConnections: database.poolSize + EMBEDDED_SPARE_CONNECTIONS,
      });
      this.logger.log(`Embedded PostgreSQL (PGlite) serving ${database.dataDir}`);
    }
    return this.embedded.url;
  }

  async stop(): Promise<void> {
    await this.embedded?.stop();
    this.embedded = undefined;
  }
}
