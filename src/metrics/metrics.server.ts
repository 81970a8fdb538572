import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { MetricsService } from './metrics.service';

/** With METRICS_PORT, `GET /metrics` on a listener of its own, without auth: keep that port off the public network. */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Metrics');
  private server: Server | undefined;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Where it listens, once it does. */
  get address(): AddressInfo | undefined {
    return (this.server?.address() as AddressInfo | null) ?? undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    const { enabled, port } = this.config.metrics;
    if (!enabled || port === undefined) return;
    const server = createServer((request, response) => {
      if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
        response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
        return;
      }
      this.metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': this.metrics.registry.contentType }).end(text),
        () => response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal error"}'),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.config.host, () => resolve());
    });
    this.server = server;
    this.logger.log(`Metrics on http://${this.address!.address}:${this.address!.port}/metrics`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}
