import { Global, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, DataSourceOptions } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { ConflictRetries } from './conflict-retries';
import { buildDataSourceOptions } from './data-source-options';
import { DatabaseEngine } from './database-engine';
import { DatabaseServer } from './database-server';
import { runMigrations } from './run-migrations';
import { TransactionRunner } from './transaction-runner';

@Global()
@Module({ providers: [DatabaseServer], exports: [DatabaseServer] })
class DatabaseServerModule {}

/** Closes the pool before the embedded server, whatever order Nest runs module shutdown hooks in. */
@Injectable()
class DatabaseShutdown implements OnApplicationShutdown {
  constructor(
    private readonly dataSource: DataSource,
    private readonly server: DatabaseServer,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource.isInitialized) {
      await this.dataSource.destroy();
    }
    await this.server.stop();
  }
}

@Global()
@Module({
  imports: [
    DatabaseServerModule,
    TypeOrmModule.forRootAsync({
      imports: [DatabaseServerModule],
      inject: [APP_CONFIG, DatabaseServer],
      // main.ts waited for the database before the application started: a failure now is not worth nine retries.
      useFactory: async (config: AppConfig, server: DatabaseServer) => ({
        ...buildDataSourceOptions(config.database, await server.url()),
        toRetry: () => false,
      }),
      dataSourceFactory: async (options?: DataSourceOptions) => {
        const dataSource = await new DataSource(options!).initialize();
        await runMigrations(dataSource, (options as { url: string }).url);
        return dataSource;
      },
    }),
  ],
  providers: [DatabaseShutdown, DatabaseEngine, ConflictRetries, TransactionRunner],
  exports: [DatabaseEngine, ConflictRetries, TransactionRunner],
})
export class DatabaseModule {}
