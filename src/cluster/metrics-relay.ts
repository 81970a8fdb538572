import cluster, { Worker } from 'node:cluster';
import { Logger } from '@nestjs/common';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

export type WorkerMetrics = Array<MetricObjectWithValues<MetricValue<string>>>;

export const WORKER_METRICS_TIMEOUT_MS = 3_000;

export interface MetricsRequest {
  type: 'leasehold:metrics-request';
  id: number;
}
export interface MetricsCollect {
  type: 'leasehold:metrics-collect';
  id: number;
}
export interface MetricsCollected {
  type: 'leasehold:metrics-collected';
  id: number;
  metrics: WorkerMetrics;
}
export interface MetricsAnswer {
  type: 'leasehold:metrics-answer';
  id: number;
  metrics: WorkerMetrics[];
  missing: number[];
}

export function isMessage<T extends { type: string }>(message: unknown, type: T['type']): message is T {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}

/** A worker that does not answer in time fails the scrape rather than pass off part of the group as all of it. */
export function relayWorkerMetrics(): void {
  const logger = new Logger('Metrics');
  const listening = new Set<Worker>();
  const pending = new Map<number, PendingCollect>();
  let nextId = 0;

  cluster.on('listening', (worker) => listening.add(worker));
  cluster.on('exit', (worker) => {
    listening.delete(worker);
    for (const request of pending.values()) request.forget(worker);
  });
  cluster.on('message', (worker, message: unknown) => {
    if (isMessage<MetricsCollected>(message, 'leasehold:metrics-collected')) {
      pending.get(message.id)?.receive(worker, message.metrics);
      return;
    }
    if (!isMessage<MetricsRequest>(message, 'leasehold:metrics-request')) return;
    void collect(worker).then(({ metrics, missing }) => {
      if (missing.length > 0) {
        logger.warn(`Workers ${missing.join(', ')} did not send their metrics within ${WORKER_METRICS_TIMEOUT_MS} ms`);
      }
      const answer: MetricsAnswer = { type: 'leasehold:metrics-answer', id: message.id, metrics, missing };
      if (worker.isConnected()) worker.send(answer, ignore);
    });
  });

  async function collect(scraped: Worker): Promise<{ metrics: WorkerMetrics[]; missing: number[] }> {
    const id = nextId++;
    const others = [...listening].filter((worker) => worker !== scraped && worker.isConnected());
    const request = new PendingCollect(others);
    pending.set(id, request);
    for (const worker of others)
      worker.send({ type: 'leasehold:metrics-collect', id } satisfies MetricsCollect, ignore);
    try {
      return await request.settled(WORKER_METRICS_TIMEOUT_MS);
    } finally {
      pending.delete(id);
    }
  }
}

/** A worker gone between check and send is forgotten by its exit; the callback keeps its error from being thrown. */
function ignore(): void {}

class PendingCollect {
  private readonly waiting: Set<Worker>;
  private readonly collected: WorkerMetrics[] = [];
  private done: (() => void) | undefined;

  constructor(workers: Worker[]) {
    this.waiting = new Set(workers);
  }

  receive(worker: Worker, metrics: WorkerMetrics): void {
    if (!this.waiting.has(worker)) return;
    this.collected.push(metrics);
    this.forget(worker);
  }

  forget(worker: Worker): void {
    if (this.waiting.delete(worker) && this.waiting.size === 0) this.done?.();
  }

  async settled(timeoutMs: number): Promise<{ metrics: WorkerMetrics[]; missing: number[] }> {
    if (this.waiting.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.done = resolve;
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
    }
    const missing = [...this.waiting].map((worker) => worker.process.pid ?? worker.id);
    return { metrics: this.collected, missing };
  }
}
