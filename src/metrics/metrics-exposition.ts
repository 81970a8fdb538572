import cluster from 'node:cluster';
import { Inject, Injectable, OnModuleDestroy, ServiceUnavailableException } from '@nestjs/common';
import { AggregatorRegistry } from 'prom-client';
import {
  isMessage,
  MetricsAnswer,
  MetricsCollect,
  MetricsCollected,
  MetricsRequest,
  WORKER_METRICS_TIMEOUT_MS,
  WorkerMetrics,
} from '../cluster/metrics-relay';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { MetricsService } from './metrics.service';
import { ScrapeCollector } from './scrape-collector';

/**
 * Among WORKERS any of them may be scraped (they share the port), so it answers for the whole group. Only the
 * scraped worker reads the database-level gauges, so a scrape costs one depth and lag read, not one per worker.
 */
@Injectable()
export class MetricsExposition implements OnModuleDestroy {
  readonly contentType: string;
  private readonly clustered: boolean;
  private readonly answers = new Map<number, (answer: MetricsAnswer) => void>();
  private nextId = 0;
  private readonly onMessage = (message: unknown): void => {
    if (isMessage<MetricsCollect>(message, 'leasehold:metrics-collect')) {
      void this.ownMetrics(false).then(
        (metrics) => send({ type: 'leasehold:metrics-collected', id: message.id, metrics } satisfies MetricsCollected),
        // Unanswered, the primary names this worker as missing.
        () => undefined,
      );
    } else if (isMessage<MetricsAnswer>(message, 'leasehold:metrics-answer')) {
      this.answers.get(message.id)?.(message);
    }
  };

  constructor(
    private readonly metrics: MetricsService,
    private readonly collector: ScrapeCollector,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.contentType = metrics.registry.contentType;
    this.clustered = cluster.isWorker && config.workers > 1;
    if (this.clustered) process.on('message', this.onMessage);
  }

  onModuleDestroy(): void {
    process.off('message', this.onMessage);
  }

  async render(): Promise<string> {
    if (!this.clustered) return this.metrics.registry.metrics();
    const [own, others] = await Promise.all([this.ownMetrics(true), this.otherWorkers()]);
    if (others.missing.length > 0) {
      // Part of the group passed off as all of it would look like counter resets to Prometheus.
      throw new ServiceUnavailableException({
        error: `metrics of workers ${others.missing.join(', ')} did not arrive within ${WORKER_METRICS_TIMEOUT_MS} ms`,
      });
    }
    return AggregatorRegistry.aggregate([own, ...others.metrics]).metrics();
  }

  private async ownMetrics(withDatabase: boolean): Promise<WorkerMetrics> {
    const { registry, processMetrics } = this.metrics;
    const names = registry
      .getMetricsAsArray()
      .map((metric) => metric.name)
      .filter((name) => withDatabase || !this.collector.databaseMetrics.has(name));
    const values = await Promise.all(names.map((name) => registry.getSingleMetric(name)!.get()));
    // Their `worker` label keeps workers apart, so nothing is combined; 'omit' (the start time) would drop them all.
    return values.map((metric) => (processMetrics.has(metric.name) ? { ...metric, aggregator: 'first' } : metric));
  }

  private otherWorkers(): Promise<MetricsAnswer> {
    const id = this.nextId++;
    return new Promise<MetricsAnswer>((resolve, reject) => {
      // The primary answers within its own bound; this one only guards against a primary gone.
      const timer = setTimeout(() => {
        this.answers.delete(id);
        reject(new ServiceUnavailableException({ error: 'metrics: the primary process did not answer' }));
      }, WORKER_METRICS_TIMEOUT_MS + 2_000);
      this.answers.set(id, (answer) => {
        clearTimeout(timer);
        this.answers.delete(id);
        resolve(answer);
      });
      send({ type: 'leasehold:metrics-request', id } satisfies MetricsRequest, () => {
        clearTimeout(timer);
        this.answers.delete(id);
        reject(new ServiceUnavailableException({ error: 'metrics: the primary process is gone' }));
      });
    });
  }
}

/** To the primary; without a callback a closed channel would be an uncaught 'error' event. */
function send(message: MetricsRequest | MetricsCollected, failed: () => void = () => undefined): void {
  process.send!(message, undefined, undefined, (error: Error | null) => {
    if (error) failed();
  });
}
