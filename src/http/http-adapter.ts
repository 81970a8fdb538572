import { createServer, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { HttpConfig } from '../config/app-config';
import { ConnectionRoster } from './connection-roster';

/** How often Node looks for connections past their header or request timeout (its default is 30 s). */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/**
 * Express as Nest runs it, on an HTTP server built with the broker's limits:
 * a client that sends its headers or its request too slowly is cut off
 * (Node checks every second instead of every 30 s, so a slow-header client
 * cannot hold a socket for long), idle kept-alive connections close after
 * HTTP_KEEP_ALIVE_TIMEOUT_MS, and HTTP_MAX_CONNECTIONS is kept by
 * ConnectionRoster, which makes room for newcomers at the expense of
 * connections that never authenticated anything.
 */
export class LeaseholdHttpAdapter extends ExpressAdapter {
  constructor(private readonly limits: HttpConfig) {
    super();
  }

  override initHttpServer(options: NestApplicationOptions): void {
    if (options?.httpsOptions) {
      throw new Error('HTTPS is terminated in front of the broker; httpsOptions are not supported');
    }
    const server = createServer(
      {
        headersTimeout: this.limits.headersTimeoutMs,
        requestTimeout: this.limits.requestTimeoutMs,
        connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
      },
      this.getInstance<RequestListener>(),
    );
    server.keepAliveTimeout = this.limits.keepAliveTimeoutMs;
    const roster = new ConnectionRoster(this.limits.maxConnections);
    server.on('connection', (socket: Socket) => roster.admit(socket));
    server.on('request', (request: IncomingMessage, response: ServerResponse) => roster.serving(request, response));
    this.httpServer = server;
  }
}
