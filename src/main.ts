import cluster from 'node:cluster';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';
import { runClusterPrimary } from './cluster/cluster-primary';
import { AppConfig } from './config/app-config';
import { ConfigError, loadConfig } from './config/load-config';
import { APP_OPTIONS, setupApp } from './setup-app';

const logger = new Logger('Leasehold');

async function bootstrap(config: AppConfig): Promise<void> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule, APP_OPTIONS);
  setupApp(app);
  app.enableShutdownHooks(['SIGTERM', 'SIGINT']);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    // Nest closes gracefully (in-flight requests finish, then the pool and
    // the embedded database close); this only bounds how long that may take.
    process.once(signal, () => {
      setTimeout(() => {
        logger.error(`Shutdown took longer than ${config.shutdownTimeoutMs} ms; exiting`);
        process.exit(1);
      }, config.shutdownTimeoutMs).unref();
    });
  }
  await app.listen(config.port, config.host);
  logger.log(`Listening on http://${config.host}:${config.port} (docs at /docs)`);
}

function configOrExit(): AppConfig {
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
