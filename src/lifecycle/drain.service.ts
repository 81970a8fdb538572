import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { NextFunction, Request, Response } from 'express';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { InFlight } from './in-flight';
import { RETRY_AFTER_SECONDS } from './shutting-down.exception';

const LIVENESS_PATH = '/health/live';

@Injectable()
export class DrainService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Shutdown');
  private readonly inFlight = new InFlight<Response>();
  private readonly sockets = new Set<Socket>();
  private readonly drainListeners: Array<() => void> = [];
  private readonly timeoutMs: number;
  private server: Server | undefined;
  private startedAt: number | undefined;
  private notifyIdle: (() => void) | undefined;
  private cut = 0;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.timeoutMs = config.shutdownTimeoutMs;
  }

  get draining(): boolean {
    return this.startedAt !== undefined;
  }

  get requestsCut(): number {
    return this.cut;
  }

  onDrain(listener: () => void): void {
    this.drainListeners.push(listener);
  }

  onApplicationBootstrap(): void {
    const server = this.adapterHost.httpAdapter?.getHttpServer() as Server | undefined;
    if (!server) return;
    this.server = server;
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  readonly middleware = (request: Request, response: Response, next: NextFunction): void => {
    // A draining process is still alive: a liveness probe failing now would only get it killed early.
    if (this.draining && request.path !== LIVENESS_PATH) {
      response.setHeader('Connection', 'close');
      response.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
      response.status(503).json({ error: 'shutting down' });
      return;
    }
    this.inFlight.add(response);
    response.on('close', this.answered);
    next();
  };

  /** One listener for every response (this = the response): nothing allocated per request on the hot path. */
  private readonly answered = ((drain: DrainService) =>
    function (this: Response): void {
      drain.inFlight.delete(this);
      if (drain.inFlight.size === 0) drain.notifyIdle?.();
    })(this);

  begin(): void {
    if (this.draining) return;
    this.startedAt = performance.now();
    this.logger.log(`Draining: ${this.inFlight.size} requests in flight, no new ones taken`);
    for (const response of this.inFlight) {
      if (!response.headersSent) response.setHeader('Connection', 'close');
    }
    for (const listener of this.drainListeners) listener();
    this.server?.close(() => undefined);
    this.server?.closeIdleConnections();
  }

  async drained(): Promise<void> {
    this.begin();
    const remaining = this.startedAt! + this.timeoutMs - performance.now();
    if (this.inFlight.size > 0 && remaining > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.notifyIdle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.cut = this.inFlight.size;
    if (this.cut > 0) {
      this.logger.error(`Shutdown timeout (${this.timeoutMs} ms): cutting ${this.cut} requests still running`);
    }
    // A half-sent request must not hold the server open.
    for (const socket of this.sockets) socket.destroy();
    this.logger.log(`Drained in ${Math.round(performance.now() - this.startedAt!)} ms`);
  }

  /** app.close() drains too, so tests and main.ts shut down the same way. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.drained();
  }
}
