import { type Server, ServerResponse } from 'node:http';
import { Server as NetServer, Socket } from 'node:net';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { NextFunction, Request, Response } from 'express';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { answersLastOnItsConnection } from '../http/connection-roster';
import { InFlight } from './in-flight';
import { RETRY_AFTER_SECONDS } from './shutting-down.exception';

const LIVENESS_PATH = '/health/live';
/** While connections are left to close, how often the drain looks at them again. */
const SETTLE_CHECK_MS = 25;

/**
 * Every request whose bytes reached this process before it closed their connection is answered, served or 503; a
 * connection is closed only after an answer that said `Connection: close`, or when no request is arriving on it.
 */
@Injectable()
export class DrainService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Shutdown');
  private readonly inFlight = new InFlight<Response>();
  private readonly sockets = new Set<Socket>();
  private readonly drainListeners: Array<() => void> = [];
  private readonly timeoutMs: number;
  private readonly idleGraceMs: number;
  private server: Server | undefined;
  private startedAt: number | undefined;
  private notifyIdle: (() => void) | undefined;
  private listenerClosed: Promise<void> = Promise.resolve();
  private cut = 0;
  private drainedOnce: Promise<void> | undefined;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.timeoutMs = config.shutdownTimeoutMs;
    this.idleGraceMs = Math.min(config.shutdownIdleGraceMs, config.shutdownTimeoutMs);
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
      this.track(response);
      closingIfLast(response);
      // After the rest of what arrived with it is parsed: a request pipelined behind this one is answered too.
      setImmediate(() => {
        response.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
        response.status(503).json({ error: 'shutting down' });
      });
      return;
    }
    this.track(response);
    next();
  };

  private track(response: Response): void {
    this.inFlight.add(response);
    response.on('close', this.answered);
  }

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
    for (const response of this.inFlight) closingIfLast(response);
    for (const listener of this.drainListeners) listener();
    // Once the connections the kernel already completed are taken (their requests then answered 503), not before.
    // Node's own server.close() would also close idle connections at once, with a request perhaps on its way.
    // A connection the kernel completes between that poll and the close is reset by the kernel, unread: a race TCP
    // leaves no way out of, which clients handle as a refusal (docs/failures.md#shutdown).
    this.listenerClosed = afterPoll().then(() => {
      if (!this.server?.listening) return;
      NetServer.prototype.close.call(this.server);
      this.logger.log('Listener closed: new connections are refused');
    });
  }

  /** Once, however many wait for it: what flushes at shutdown waits for the last request's counts. */
  drained(): Promise<void> {
    this.drainedOnce ??= this.drain();
    return this.drainedOnce;
  }

  private async drain(): Promise<void> {
    this.begin();
    await this.listenerClosed;
    const startedAt = this.startedAt!;
    const deadline = startedAt + this.timeoutMs;
    const graceEnds = startedAt + this.idleGraceMs;
    for (let now = performance.now(); now < deadline; now = performance.now()) {
      if (this.inFlight.size > 0) {
        await this.answeredWithin(deadline - now);
        continue;
      }
      if (this.openSockets() === 0) break;
      if (now >= graceEnds) {
        // What is already in a socket's buffer is read first, and becomes a request to answer rather than a reset.
        await afterPoll();
        this.server?.closeIdleConnections();
        if (this.inFlight.size === 0 && this.openSockets() === 0) break;
      }
      // Connections closing after their last answer, or with a request still arriving.
      await new Promise((resolve) => setTimeout(resolve, Math.min(SETTLE_CHECK_MS, deadline - now)));
    }
    this.cut = this.inFlight.size;
    if (this.cut > 0) {
      this.logger.error(`Shutdown timeout (${this.timeoutMs} ms): cutting ${this.cut} requests still running`);
    }
    // A half-sent request must not hold the server open.
    for (const socket of this.sockets) socket.destroy();
    this.logger.log(`Drained in ${Math.round(performance.now() - startedAt)} ms`);
  }

  /** app.close() drains too, so tests and main.ts shut down the same way. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.drained();
  }

  private openSockets(): number {
    let open = 0;
    for (const socket of this.sockets) if (!socket.destroyed) open += 1;
    return open;
  }

  private answeredWithin(waitMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.notifyIdle = undefined;
        resolve();
      }, waitMs);
      this.notifyIdle = () => {
        clearTimeout(timer);
        this.notifyIdle = undefined;
        resolve();
      };
    });
  }
}

/**
 * A poll of the sockets lies between now and the promise's end: a check-phase callback scheduled from a check-phase
 * callback runs after the next turn's poll, whichever phase this was called in.
 */
function afterPoll(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/**
 * The answer says `Connection: close` unless another request on its connection is waiting behind it: Node drops the
 * answers queued behind one that closes the connection, served or not. Decided as the head is written.
 */
function closingIfLast(response: ServerResponse): void {
  if (response.headersSent) return;
  const writeHead = response.writeHead.bind(response) as (...args: unknown[]) => ServerResponse;
  response.writeHead = (...args: unknown[]): ServerResponse => {
    if (answersLastOnItsConnection(response)) response.setHeader('Connection', 'close');
    return writeHead(...args);
  };
}
