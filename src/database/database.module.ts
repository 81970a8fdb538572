import { Global, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { ConflictRetries } from './conflict-retries';
import { Database } from './database';
import { DatabaseEngine } from './database-engine';
import { DatabaseServer } from './database-server';
import { poolConfig } from './pool-config';
import { runMigrations } from './run-migrations';
import { TransactionRunner } from './transaction-runner';

/** Closes the pool before the embedded server, whatever order Nest runs module shutdown hooks in. */
@Injectable()
class DatabaseShutdown implements OnApplicationShutdown {
  constructor(
    private readonly database: Database,
    private readonly server: DatabaseServer,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.database.end();
    await this.server.stop();
  }
}

@Global()
@Module({
  providers: [
    DatabaseServer,
    {
      provide: Database,
      inject: [APP_CONFIG, DatabaseServer],
      // main.ts waited for the database before the application started: a failure now fails the start.
      useFactory: async (config: AppConfig, server: DatabaseServer): Promise<Database> => {
        const url = await server.url();
        const database = new Database(poolConfig(config.database, url));
        try {
          await runMigrations(database, config.database, url);
        } catch (error) {
          await database.end();
          throw error;
        }
        return database;
      },
    },
    DatabaseShutdown,
    DatabaseEngine,
    ConflictRetries,
    TransactionRunner,
  ],
  exports: [DatabaseServer, Database, DatabaseEngine, ConflictRetries, TransactionRunner],
})
export class DatabaseModule {}
