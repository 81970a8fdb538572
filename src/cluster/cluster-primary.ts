import cluster, { Worker } from 'node:cluster';
import { Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { EmbeddedPostgres } from '../database/embedded-postgres';
import { migrateDatabase } from '../database/run-migrations';

/**
 * WORKERS > 1: this process serves no requests. It owns what must exist once
 * per machine (the embedded database, when there is no DATABASE_URL, and the
 * migrations), then forks workers that share the listening port. Workers are
 * ordinary stateless brokers; one that dies is replaced.
 */
export async function runClusterPrimary(config: AppConfig): Promise<void> {
  const logger = new Logger('Cluster');
  let embedded: EmbeddedPostgres | undefined;
  let url = config.database.url;
  if (!url) {
    embedded = await EmbeddedPostgres.start({
      dataDir: config.database.dataDir,
      maxConnections: config.database.poolSize * config.workers + 10,
    });
    url = embedded.url;
    logger.log(`Embedded PostgreSQL (PGlite) serving ${config.database.dataDir} for ${config.workers} workers`);
  }
  await migrateDatabase(config.database, url);

  const workerEnv = { DATABASE_URL: url };
  let stopping = false;
  const fork = (): Worker => cluster.fork(workerEnv);
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    logger.warn(`Worker ${worker.process.pid} exited (${signal ?? code}); starting another`);
    fork();
  });
  for (let index = 0; index < config.workers; index += 1) fork();

  const stop = async (signal: NodeJS.Signals): Promise<void> => {
    if (stopping) return;
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => !!worker);
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve) => {
            worker.once('exit', () => resolve());
            worker.process.kill(signal);
          }),
      ),
    );
    await embedded?.stop();
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void stop(signal));
  }
}
