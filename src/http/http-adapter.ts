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
        IncomingMessage: constructedAs(IncomingMessage, express, 'request'),
        ServerResponse: constructedAs(ServerResponse, express, 'response'),
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
    // A null-prototype object is a dictionary from birth (160 bytes), held by each parked poll; nothing here writes it.
    res.locals = {};
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
 * A subclass of Node's HTTP object that Express takes for its own prototype (its per-request Object.setPrototypeOf is
 * then a no-op, which keeps access fast). A class: V8 lays its objects out for Node's constructor and shares their
 * hidden classes. A plain function calling Node's on its object had V8 plan for that function's empty body, and every
 * response fell into dictionary mode at its first symbol-keyed property (3.3 KB a request, held by each parked poll);
 * Reflect.construct with a plain function as new.target gave each object hidden classes of its own (7 KB).
 */
function constructedAs<T extends typeof IncomingMessage | typeof ServerResponse>(
  base: T,
  express: ExpressApp,
  key: 'request' | 'response',
): T {
  const prototype = express[key];
  if (!Object.prototype.isPrototypeOf.call(base.prototype, prototype)) {
    throw new Error(`Express's ${base.name} prototype does not derive from Node's`);
  }
  const Constructed = class extends (base as typeof IncomingMessage) {};
  Object.defineProperties(Constructed.prototype, Object.getOwnPropertyDescriptors(prototype));
  Object.setPrototypeOf(Constructed.prototype, Object.getPrototypeOf(prototype) as object);
  express[key] = Constructed.prototype;
  return Constructed as unknown as T;
}
