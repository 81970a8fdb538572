import './nest-without-icu';
import cluster from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';
import { runClusterPrimary } from './cluster/cluster-primary';
import { AppConfig } from './config/app-config';
import { loadEnvFile } from './config/env-file';
import { ConfigError, loadConfig } from './config/load-config';
import { databaseProblem } from './database/database-reachability';
import { workBudgetMs } from './database/deadline';
import { LeaseholdHttpAdapter } from './http/http-adapter';
import { DrainService } from './lifecycle/drain.service';
import { portProblem } from './lifecycle/port-check';
import { PinoLoggerService, rootLogger } from './logging/root-logger';
import { APP_OPTIONS, setupApp } from './setup-app';
import { errorMessage } from './common/error-message';

const logger = new Logger('Leasehold');
/** Connections waiting to be accepted; the kernel caps it at net.core.somaxconn. */
const LISTEN_BACKLOG = 4096;

async function bootstrap(config: AppConfig, loggerService: PinoLoggerService): Promise<void> {
  let app: NestExpressApplication;
  try {
    app = await NestFactory.create<NestExpressApplication>(
      AppModule,
      new LeaseholdHttpAdapter(config.http, config.tenantHeader),
      {
        ...APP_OPTIONS,
        logger: loggerService,
        // Nest's default answer to a failed start is process.abort(), a core dump.
        abortOnError: false,
      },
    );
  } catch (error) {
    exit(`Start-up failed: ${errorMessage(error)}`);
  }
  setupApp(app);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    // once: a second signal gets Node's default, an immediate exit.
    process.once(signal, () => void shutDown(app, config, signal));
  }
  await app.init();
  const server = app.getHttpServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // Node's default backlog (511) drops connections arriving in a burst, which then wait for TCP's retries.
      server.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG }, () => resolve());
    });
  } catch (error) {
    await app.close().catch(() => undefined);
    exit(`Cannot listen on ${config.host}:${config.port}: ${errorMessage(error)}`);
  }
  const { address, port } = server.address() as AddressInfo;
  const consoleAt = config.consoleEnabled ? `, console at http://${address}:${port}/console/` : '';
  logger.log(`Listening on http://${address}:${port} (API docs at /docs${consoleAt})`);
}

/** A request cut at SHUTDOWN_TIMEOUT_MS holds its connection for at most the statement budget: all closing may add. */
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
    logger.error(`Shutdown failed: ${errorMessage(error)}`);
    process.exit(1);
  }
  logger.log('Stopped');
  process.exit(drain.requestsCut > 0 ? 1 : 0);
}

/** Lines before the configuration is known follow LOG_FORMAT and LOG_LEVEL as far as they can be read. */
function configOrExit(): AppConfig {
  loadEnvFile();
  try {
    return loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const format = process.env.LOG_FORMAT?.trim().toLowerCase() === 'pretty' ? 'pretty' : 'json';
    Logger.overrideLogger(new PinoLoggerService(rootLogger({ level: 'info', format })));
    exit(error.message);
  }
}

function exit(problem: string): never {
  logger.error(problem);
  process.exit(1);
}

/** Node's own warnings and a crash's stack trace as lines of the log too, not text on stderr. */
function logProcessEvents(): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning) => logger.warn(`${warning.name}: ${warning.message}`));
  process.on('uncaughtException', (error) => {
    logger.fatal(`Uncaught exception: ${error.stack ?? error.message}`);
    process.exit(1);
  });
}

async function main(): Promise<void> {
  const config = configOrExit();
  const loggerService = new PinoLoggerService(rootLogger(config.log));
  Logger.overrideLogger(loggerService);
  logProcessEvents();
  if (cluster.isPrimary) {
    const portTaken = await portProblem(config.host, config.port);
    if (portTaken) exit(portTaken);
    if (config.database.url) {
      const unreachable = await databaseProblem(config.database, config.database.url);
      if (unreachable) exit(unreachable);
    }
  }
  if (config.workers > 1 && cluster.isPrimary) await runClusterPrimary(config);
  else await bootstrap(config, loggerService);
}

void main().catch((error: unknown) => exit(`Start-up failed: ${errorMessage(error)}`));
