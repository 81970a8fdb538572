import cluster, { Worker } from 'node:cluster';
import { Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { migrateDatabase } from '../database/run-migrations';
import { relayWorkerMetrics } from './metrics-relay';

export async function runClusterPrimary(config: AppConfig): Promise<void> {
  const logger = new Logger('Cluster');
  await migrateDatabase(config.database, config.database.url!);
  logger.log(`Starting ${config.workers} workers`);

  relayWorkerMetrics();
  let stopping = false;
  const fork = (): Worker => cluster.fork();
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
    // Each worker drains on its own; the primary exits as cleanly as the least clean of them.
    const codes = await Promise.all(
      workers.map(
        (worker) =>
          new Promise<number>((resolve) => {
            worker.once('exit', (code: number | null) => resolve(code ?? 1));
            worker.process.kill(signal);
          }),
      ),
    );
    process.exit(Math.max(0, ...codes));
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void stop(signal));
  }
}
