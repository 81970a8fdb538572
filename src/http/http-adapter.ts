import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { NestApplicationOptions } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Application, Request, Response } from 'express';
import { HttpConfig } from '../config/app-config';
import { ConnectionRoster } from './connection-roster';
import { FairDispatch } from './fair-dispatch';

/** Express's app with the request and response prototypes it gives each request (not in its typings). */
type ExpressApp = Application & { request: object; response: object };

/** Node's default is 30 s, long enough for a slow-header client to hold a socket. */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

export class LeaseholdHttpAdapter extends ExpressAdapter {
  private frontDoor: FrontDoor | undefined;
  readonly dispatch: FairDispatch;

  constructor(
    private readonly limits: HttpConfig,
    tenantHeader?: string,
  ) {
    super();
    this.dispatch = new FairDispatch(tenantHeader);
  }

  setFrontDoor(frontDoor: FrontDoor | undefined): void {
    this.frontDoor = frontDoor;
  }

  override initHttpServer(options: NestApplicationOptions): void {
    if (options?.httpsOptions) {
      throw new Error('HTTPS is terminated in front of the broker; httpsOptions are not supported');
    }
    const express = this.getInstance<ExpressApp>();
    const roster = new ConnectionRoster(this.limits.maxConnections, {
      connections: this.limits.tenantMaxConnections,
      requests: this.limits.tenantMaxRequests,
    });
    const server = createServer(
      {
        // Express's own prototypes: its per-request Object.setPrototypeOf is then a no-op, which keeps access fast.
        IncomingMessage: constructedAs(IncomingMessage, express.request),
        ServerResponse: constructedAs(ServerResponse, express.response),
        headersTimeout: this.limits.headersTimeoutMs,
        requestTimeout: this.limits.requestTimeoutMs,
        connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
      },
      (request, response) => {
        if (roster.serving(request, response)) this.dispatch.admit(request, () => this.serve(request, response));
      },
    );
    server.keepAliveTimeout = this.limits.keepAliveTimeoutMs;
    server.on('connection', (socket: Socket) => roster.admit(socket));
    this.httpServer = server;
  }

  private serve(request: IncomingMessage, response: ServerResponse): void {
    const express = this.getInstance<ExpressApp>();
    if (!this.frontDoor?.accepts(request)) return void express(request, response);
    // What Express's app.handle and router set up, so that the front door's handlers see an Express request.
    const req = request as Request;
    const res = response as Response;
    req.res = res;
    res.req = req;
    res.locals = Object.create(null) as Record<string, unknown>;
    req.originalUrl = req.url;
    req.baseUrl = '';
    this.frontDoor.serve(req, res, () => void express(request, response));
  }
}

export interface FrontDoor {
  accepts(request: IncomingMessage): boolean;
  serve(request: Request, response: Response, next: () => void): void;
}

/**
 * Node's HTTP objects built with another prototype. Reflect.construct gives them the layout V8 planned for Node's own
 * constructor; calling it on the object of a new function had V8 plan for that function's empty body, and every
 * response fell into dictionary mode at its first symbol-keyed property: 3.3 KB a request, held by each parked poll.
 */
function constructedAs<T extends typeof IncomingMessage | typeof ServerResponse>(base: T, prototype: object): T {
  if (!Object.prototype.isPrototypeOf.call(base.prototype, prototype)) {
    throw new Error(`Express's ${base.name} prototype does not derive from Node's`);
  }
  const constructor = function (...args: unknown[]): object {
    return Reflect.construct(base, args, constructor) as object;
  };
  constructor.prototype = prototype;
  return constructor as unknown as T;
}
