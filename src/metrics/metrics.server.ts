import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  HttpException,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { ProbeService } from '../health/probe.service';
import { bearerMatches } from './metrics-token';
import { MetricsExposition } from './metrics-exposition';

/** Its own port, so a flood on the API port does not reach these answers. Keep it off the public network. */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Metrics');
  private server: Server | undefined;

  constructor(
    private readonly exposition: MetricsExposition,
    private readonly probes: ProbeService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get address(): AddressInfo | undefined {
    return (this.server?.address() as AddressInfo | null) ?? undefined;
  }

  async onApplicationBootstrap(): Promise<void> {
    const { enabled, port } = this.config.metrics;
    if (!enabled || port === undefined) return;
    const server = createServer((request, response) => {
      this.answer(request, response).catch((error: unknown) =>
        error instanceof HttpException
          ? send(response, error.getStatus(), JSON.stringify(error.getResponse()))
          : send(response, 500, '{"error":"internal error"}'),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.config.host, () => resolve());
    });
    this.server = server;
    this.logger.log(`Metrics and probes on http://${this.address!.address}:${this.address!.port}`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = request.url?.split('?')[0];
    const probe = request.method === 'GET' && path !== '/health' ? this.probes.answer(path ?? '') : undefined;
    if (probe) {
      const { status, body } = await probe;
      return send(response, status, JSON.stringify(body));
    }
    if (request.method !== 'GET' || path !== '/metrics') return send(response, 404, '{"error":"not found"}');
    const token = this.config.metrics.token;
    if (token !== undefined && !bearerMatches(request.headers.authorization, token)) {
      response.setHeader('WWW-Authenticate', 'Bearer');
      return send(response, 401, '{"error":"Authentication required"}');
    }
    const text = await this.exposition.render();
    response.writeHead(200, { 'content-type': this.exposition.contentType }).end(text);
  }
}

function send(response: ServerResponse, status: number, json: string): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(json);
}
