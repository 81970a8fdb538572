import cluster from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Logger as PinoNestLogger } from 'nestjs-pino';
import { AppModule } from './app.module';
import { runClusterPrimary } from './cluster/cluster-primary';
import { AppConfig } from './config/app-config';
import { loadEnvFile } from './config/env-file';
import { ConfigError, loadConfig } from './config/load-config';
import { workBudgetMs } from './database/deadline';
import { LeaseholdHttpAdapter } from './http/http-adapter';
import { DrainService } from './lifecycle/drain.service';
import { APP_OPTIONS, setupApp } from './setup-app';

const logger = new Logger('Leasehold');
/** Connections waiting to be accepted; the kernel caps it at net.core.somaxconn. */
const LISTEN_BACKLOG = 4096;

async function bootstrap(config: AppConfig): Promise<void> {
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule,
    new LeaseholdHttpAdapter(config.http),
    // Held until the structured logger is in place, so boot logs are JSON lines too.
    { ...APP_OPTIONS, bufferLogs: true },
  );
  app.useLogger(app.get(PinoNestLogger));
  // main.ts listens on the HTTP server itself, so Nest's flush at app.listen() never comes.
  app.flushLogs();
  setupApp(app);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    // once: a second signal gets Node's default, an immediate exit.
    process.once(signal, () => void shutDown(app, config, signal));
  }
  await app.init();
  const server = app.getHttpServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Node's default backlog (511) drops connections arriving in a burst, which then wait for TCP's retries.
    server.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  logger.log(`Listening on http://${address}:${port} (docs at /docs)`);
}

/**
 * Drains (see DrainService), closes the pool and the embedded database, and
 * exits 0; 1 when a request had to be cut at SHUTDOWN_TIMEOUT_MS or closing
 * failed. A request cut while its statement still runs holds its connection
 * for at most the statement budget, so that is all closing may add.
 */
async function shutDown(app: NestExpressApplication, config: AppConfig, signal: NodeJS.Signals): Promise<void> {
  logger.log(`${signal}: shutting down (requests in flight get up to ${config.shutdownTimeoutMs} ms)`);
  const hardStopMs = config.shutdownTimeoutMs + workBudgetMs(config.database);
  setTimeout(() => {
    logger.error(`Shutdown took longer than ${hardStopMs} ms; exiting`);
    process.exit(1);
  }, hardStopMs).unref();
  const drain = app.get(DrainService);
  drain.begin();
  try {
    await app.close();
  } catch (error) {
    logger.error(`Shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
  logger.log('Stopped');
  process.exit(drain.requestsCut > 0 ? 1 : 0);
}

function configOrExit(): AppConfig {
  loadEnvFile();
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      logger.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

const config = configOrExit();
void (config.workers > 1 && cluster.isPrimary ? runClusterPrimary(config) : bootstrap(config));
