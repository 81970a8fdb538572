import {
  CanActivate,
  Catch,
  ExceptionFilter,
  ForbiddenException,
  Get,
  HttpCode,
  HttpStatus,
  NestInterceptor,
  PipeTransform,
  Post,
  Session,
  Sse,
  Type,
  VersioningType,
} from '@nestjs/common';
import {
  EXCEPTION_FILTERS_METADATA,
  GUARDS_METADATA,
  HEADERS_METADATA,
  INTERCEPTORS_METADATA,
  PIPES_METADATA,
  REDIRECT_METADATA,
} from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ApplicationConfig, BaseExceptionFilter, ExternalContextCreator, HttpAdapterHost } from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module } from '@nestjs/core/injector/module';
import type { NextFunction, Request, Response } from 'express';
import { AppConfig } from '../config/app-config';
import { AckController } from '../ack/ack.controller';
import { LeaseController } from '../lease/lease.controller';
import { JsonText } from '../common/json-text';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { PopController } from '../pop/pop.controller';
import { PushController } from '../push/push.controller';
import { ExpressParamsFactory, FastPathMiddleware } from './fast-path.middleware';
import { FastRouteEntry, FastRouteTable } from './fast-route-table';
import { RequestBodyInterceptor } from './request-body.interceptor';

function entry(
  controller: Type<object>,
  handler: string,
  method: string,
  path: string,
  provided = true,
): FastRouteEntry {
  const providers = new Map(provided ? [[controller, { instance: { provided: controller.name } }]] : []);
  const host = { providers } as unknown as Module;
  return { controller, handler, name: `${controller.name}.${handler}`, host, method, path };
}

const LEASE = entry(LeaseController, 'extend', 'POST', '/api/v1/lease/:leaseId/extend');
const PUSH = entry(PushController, 'push', 'POST', '/api/v1/push');
const TABLE: FastRouteEntry[] = [
  { ...LEASE, keepsUndecodable: ['leaseId'] },
  PUSH,
  entry(AckController, 'ack', 'POST', '/api/v1/ack'),
  entry(AckController, 'ackBatch', 'POST', '/api/v1/ack/batch'),
  entry(PopController, 'popQueue', 'GET', '/api/v1/pop/queue/:queue'),
  entry(PopController, 'popPartition', 'GET', '/api/v1/pop/queue/:queue/partition/:partition'),
];

class Allow implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

class Identity implements PipeTransform {
  transform(value: unknown): unknown {
    return value;
  }
}

const CONFIG = {
  bodyLimitBytes: 1024,
  limits: { bodyMaxInflateRatio: 10, bodyMaxJsonValues: 10 },
  http: { bodyMinBytesPerSecond: 0, bodyMinRateGraceMs: 5_000 },
} as AppConfig;

const anInterceptor: NestInterceptor = { intercept: (_context, next) => next.handle() };

/** The middleware as the application starts it, over these routes. */
function middlewareFor(
  configure: (config: ApplicationConfig) => void = () => undefined,
  answer: () => unknown = () => ({ renewed: 1 }),
  routes: FastRouteEntry[] = TABLE,
) {
  const config = new ApplicationConfig();
  configure(config);
  const handler = jest.fn(async () => answer());
  const contexts = { create: jest.fn(() => handler) } as unknown as ExternalContextCreator;
  const adapterHost = { httpAdapter: {} } as HttpAdapterHost;
  const middleware = new FastPathMiddleware({ routes } as unknown as FastRouteTable, contexts, config, adapterHost);
  middleware.enable();
  return { middleware, contexts, handler, start: () => middleware.onApplicationBootstrap() };
}

function started(...args: Parameters<typeof middlewareFor>) {
  const built = middlewareFor(...args);
  built.start();
  return built;
}

/** A response whose end resolves `answered` with what was sent. */
function responseAnswered() {
  const response = { headersSent: false, statusCode: 0, setHeader: jest.fn() } as unknown as Response;
  const answered = new Promise<unknown>((resolve) => Object.assign(response, { end: resolve }));
  return { response, answered };
}

describe('FastPathMiddleware at start-up', () => {
  it("calls the route's own handler on its module's controller in Nest's context: guards, pipes and filters, no interceptor chain", () => {
    const { contexts } = started((config) => {
      config.useGlobalGuards(new Allow());
      config.useGlobalPipes(new Identity());
      config.useGlobalInterceptors(new RequestBodyInterceptor({} as never, CONFIG));
    });

    expect(contexts.create).toHaveBeenCalledWith(
      { provided: 'LeaseController' },
      LeaseController.prototype.extend,
      'extend',
      expect.any(String),
      expect.any(ExpressParamsFactory),
      undefined,
      undefined,
      { guards: true, interceptors: false, filters: false },
    );
    expect(contexts.create).toHaveBeenCalledTimes(TABLE.length);
  });

  it('does nothing unless the application serves its fast routes here', () => {
    const config = new ApplicationConfig();
    config.useGlobalInterceptors(anInterceptor);
    const contexts = { create: jest.fn() } as unknown as ExternalContextCreator;
    const table = { routes: TABLE } as unknown as FastRouteTable;
    const middleware = new FastPathMiddleware(table, contexts, config, { httpAdapter: {} } as HttpAdapterHost);

    expect(() => middleware.onApplicationBootstrap()).not.toThrow();
    expect(contexts.create).not.toHaveBeenCalled();
    expect(middleware.accepts({ method: 'POST', url: '/api/v1/push' })).toBe(false);
  });

  it('refuses to start with a route that leaves its body to RequestBodyInterceptor, naming it', () => {
    class Plain {
      @Get() read(): void {}
    }
    const { start } = middlewareFor(
      (config) => config.useGlobalInterceptors(new RequestBodyInterceptor({} as never, CONFIG)),
      undefined,
      [...TABLE, entry(Plain, 'read', 'GET', '/plain')],
    );

    expect(start).toThrow(
      new Error('@FastRoute() Plain.read cannot be served ahead of the router: RequestBodyInterceptor reads its body'),
    );
  });

  it('names every route it cannot serve, and why', () => {
    const { start, contexts } = middlewareFor((config) => config.useGlobalInterceptors(anInterceptor));

    expect(start).toThrow(
      TABLE.map(
        (route) =>
          `@FastRoute() ${route.name} cannot be served ahead of the router: global interceptors are registered`,
      ).join('; '),
    );
    expect(contexts.create).not.toHaveBeenCalled();
  });

  it.each<[string, (config: ApplicationConfig) => void, string]>([
    ['versioning', (config) => config.enableVersioning({ type: VersioningType.URI }), 'versioning is enabled'],
    ['a global interceptor', (config) => config.useGlobalInterceptors(anInterceptor), 'global interceptors'],
    ['a request-scoped global guard', (config) => config.addGlobalRequestGuard(new InstanceWrapper()), 'request'],
    [
      'a request-scoped global interceptor',
      (config) => config.addGlobalRequestInterceptor(new InstanceWrapper()),
      'request-scoped',
    ],
    ['a request-scoped global pipe', (config) => config.addGlobalRequestPipe(new InstanceWrapper()), 'request-scoped'],
    [
      'a request-scoped global filter',
      (config) => config.addGlobalRequestFilter(new InstanceWrapper()),
      'request-scoped',
    ],
  ])('refuses to start with %s', (_name, configure, reason) => {
    const { start } = middlewareFor(configure);

    expect(start).toThrow(reason);
    expect(start).toThrow('LeaseController.extend');
  });

  it('serves with a global prefix: the table holds the paths the router gives the routes', () => {
    const { middleware } = started((config) => config.setGlobalPrefix('v1'), undefined, [
      entry(PushController, 'push', 'POST', '/v1/api/v1/push'),
    ]);

    expect(middleware.accepts({ method: 'POST', url: '/v1/api/v1/push' })).toBe(true);
    expect(middleware.accepts({ method: 'POST', url: '/api/v1/push' })).toBe(false);
  });

  it.each([
    ['guards', GUARDS_METADATA],
    ['interceptors', INTERCEPTORS_METADATA],
    ['pipes', PIPES_METADATA],
    ['exception filters', EXCEPTION_FILTERS_METADATA],
  ])('refuses to start when the route declares its own %s', (name, key) => {
    for (const target of [LeaseController, LeaseController.prototype.extend]) {
      Reflect.defineMetadata(key, [Allow], target);
      try {
        expect(middlewareFor().start).toThrow(
          `LeaseController.extend cannot be served ahead of the router: the route declares its own ${name}`,
        );
      } finally {
        Reflect.deleteMetadata(key, target);
      }
    }
  });

  it('serves a route whose only interceptor is NoContentWhenEmptyInterceptor, and refuses one with another', () => {
    expect(Reflect.getMetadata(INTERCEPTORS_METADATA, PopController)).toEqual([NoContentWhenEmptyInterceptor]);
    expect(middlewareFor().start).not.toThrow();

    Reflect.defineMetadata(INTERCEPTORS_METADATA, [Allow], PopController.prototype.popPartition);
    try {
      expect(middlewareFor().start).toThrow('PopController.popPartition cannot be served ahead of the router');
    } finally {
      Reflect.deleteMetadata(INTERCEPTORS_METADATA, PopController.prototype.popPartition);
    }
  });

  it.each([
    ['response headers', HEADERS_METADATA, [{ name: 'x-a', value: 'b' }]],
    ['a redirect', REDIRECT_METADATA, { url: '/elsewhere' }],
  ])('refuses to start when the route declares %s', (name, key, value) => {
    Reflect.defineMetadata(key, value, PushController.prototype.push);
    try {
      expect(middlewareFor().start).toThrow(
        `PushController.push cannot be served ahead of the router: the route declares ${name}`,
      );
    } finally {
      Reflect.deleteMetadata(key, PushController.prototype.push);
    }
  });

  it('refuses to start with server-sent events or a parameter kind it does not read', () => {
    class Odd {
      @Sse('events') events(): void {}
      @Post('session') session(@Session() _session: unknown): void {}
    }

    expect(middlewareFor(undefined, undefined, [entry(Odd, 'events', 'GET', '/events')]).start).toThrow(
      'Odd.events cannot be served ahead of the router: the route declares server-sent events',
    );
    expect(middlewareFor(undefined, undefined, [entry(Odd, 'session', 'POST', '/session')]).start).toThrow(
      'Odd.session cannot be served ahead of the router: the route takes a parameter of kind SESSION',
    );
  });

  it('refuses to start when the controller is not a provider of its module too', () => {
    const route = entry(PushController, 'push', 'POST', '/api/v1/push', false);

    expect(middlewareFor(undefined, undefined, [route]).start).toThrow(
      "PushController.push cannot be served ahead of the router: PushController is not also a provider of its module, where Nest resolves the route's pipes",
    );
  });
});

describe('FastPathMiddleware.use', () => {
  it.each([
    ['another method', 'GET', '/api/v1/lease/abc/extend'],
    ['another path', 'POST', '/api/v1/pop'],
    ['a GET of the push route', 'GET', '/api/v1/push'],
    ['a longer push path', 'POST', '/api/v1/push/more'],
    ['an empty lease id', 'POST', '/api/v1/lease//extend'],
    ['a HEAD of a pop route', 'HEAD', '/api/v1/pop/queue/q'],
    ['a POST of a pop route', 'POST', '/api/v1/pop/queue/q'],
    ['an empty partition', 'GET', '/api/v1/pop/queue/q/partition/'],
    ['a queue name that does not decode (the router answers 400)', 'GET', '/api/v1/pop/queue/%E0%A4%A'],
  ])('passes %s on to the router', (_name, method, url) => {
    const { middleware, handler } = started();
    const next = jest.fn();

    middleware.use({ method, url } as Request, {} as Response, next);

    expect(next).toHaveBeenCalledTimes(1);
    expect(handler).not.toHaveBeenCalled();
    expect(middleware.accepts({ method, url })).toBe(false);
  });

  it("hands the handler the decoded id as the route parameter, and answers with the handler's result", async () => {
    const { middleware } = started();
    const request = { method: 'POST', url: '/API/v1/lease/a%20b/extend/?x=1' } as Request;
    const { response, answered } = responseAnswered();
    const next = jest.fn();

    middleware.use(request, response, next);

    expect(next).not.toHaveBeenCalled();
    expect(request.params).toEqual({ leaseId: 'a b' });
    expect(await answered).toBe('{"renewed":1}');
    expect(response.statusCode).toBe(200);
  });

  it('hands a lease id whose encoding does not decode as it was sent', async () => {
    const { middleware } = started();
    const request = { method: 'POST', url: '/api/v1/lease/%E0%A4%A/extend' } as Request;
    const { response, answered } = responseAnswered();

    middleware.use(request, response, jest.fn());

    await answered;
    expect(request.params).toEqual({ leaseId: '%E0%A4%A' });
  });

  it('serves a push with no route parameters, answering 201, and counts what each route served', async () => {
    const { middleware } = started();
    const request = { method: 'POST', url: '/Api/V1/Push/?x=1' } as Request;
    const { response, answered } = responseAnswered();

    middleware.use(request, response, jest.fn());

    expect(request.params).toEqual({});
    expect(await answered).toBe('{"renewed":1}');
    expect(response.statusCode).toBe(201);
    expect(middleware.routes.map((route) => [route.path, route.served])).toEqual(
      TABLE.map((route) => [route.path, route.path === '/api/v1/push' ? 1 : 0]),
    );
  });

  it("answers with the status the router would: the route's @HttpCode, else 201 for a POST and 200 otherwise", async () => {
    class Plain {
      @Post('make') make(): void {}
      @Post('accept') @HttpCode(HttpStatus.ACCEPTED) accept(): void {}
      @Get('read') read(): void {}
    }
    const { middleware } = started(undefined, undefined, [
      entry(Plain, 'make', 'POST', '/make'),
      entry(Plain, 'accept', 'POST', '/accept'),
      entry(Plain, 'read', 'GET', '/read'),
    ]);
    const statusOf = async (method: string, url: string) => {
      const { response, answered } = responseAnswered();
      middleware.use({ method, url } as Request, response, jest.fn());
      await answered;
      return response.statusCode;
    };

    expect(await statusOf('POST', '/make')).toBe(201);
    expect(await statusOf('POST', '/accept')).toBe(202);
    expect(await statusOf('GET', '/read')).toBe(200);
  });
});

describe('FastPathMiddleware.use on a pop route', () => {
  function popWith(answer: unknown) {
    const { middleware } = started(undefined, () => answer);
    const request = { method: 'GET', url: '/API/v1/pop/queue/a%2Fb/partition/P%201/?batch=2' } as Request;
    const { response, answered } = responseAnswered();
    middleware.use(request, response, jest.fn());
    return { request, response, answered };
  }

  it('decodes each segment as Express does and keeps its case', async () => {
    const { request, answered } = popWith(undefined);

    await answered;
    expect(request.params).toEqual({ queue: 'a/b', partition: 'P 1' });
  });

  it('answers 204 with no body and no content headers when the handler has nothing', async () => {
    const { response, answered } = popWith(undefined);

    expect(await answered).toBeUndefined();
    expect(response.statusCode).toBe(204);
    expect(response.setHeader).not.toHaveBeenCalled();
  });

  it("sends a JsonText's text as it is, as JSON", async () => {
    const { response, answered } = popWith(new JsonText('{"data":{"a": 1}}'));

    expect(await answered).toBe('{"data":{"a": 1}}');
    expect(response.statusCode).toBe(200);
    expect(response.setHeader).toHaveBeenCalledWith('Content-Type', 'application/json; charset=utf-8');
    expect(response.setHeader).toHaveBeenCalledWith('Content-Length', 17);
  });
});

describe('FastPathMiddleware failures', () => {
  @Catch()
  class CatchAll implements ExceptionFilter {
    catch = jest.fn();
  }

  @Catch(ForbiddenException)
  class CatchForbidden implements ExceptionFilter {
    catch = jest.fn();
  }

  async function fail(error: unknown, configure: (config: ApplicationConfig) => void): Promise<void> {
    const config = new ApplicationConfig();
    configure(config);
    const contexts = { create: () => () => Promise.reject(error) } as unknown as ExternalContextCreator;
    const middleware = new FastPathMiddleware({ routes: TABLE } as unknown as FastRouteTable, contexts, config, {
      httpAdapter: {},
    } as HttpAdapterHost);
    middleware.enable();
    middleware.onApplicationBootstrap();
    middleware.use({ method: 'POST', url: '/api/v1/lease/x/extend' } as Request, {} as Response, jest.fn());
    // The rejection reaches the filter a few microtasks on.
    await new Promise((resolve) => setImmediate(resolve));
  }

  it('goes to the filter the router would choose: the last registered that catches it', async () => {
    const all = new CatchAll();
    const forbidden = new CatchForbidden();

    await fail(new ForbiddenException(), (config) => config.useGlobalFilters(all, forbidden));
    await fail(new Error('boom'), (config) => config.useGlobalFilters(all, forbidden));

    expect(forbidden.catch).toHaveBeenCalledTimes(1);
    expect(forbidden.catch.mock.calls[0][0]).toBeInstanceOf(ForbiddenException);
    expect(all.catch).toHaveBeenCalledTimes(1);
    expect(all.catch.mock.calls[0][0]).toEqual(new Error('boom'));
  });

  it("falls back to Nest's BaseExceptionFilter when no filter catches it", async () => {
    const base = jest.spyOn(BaseExceptionFilter.prototype, 'catch').mockImplementation(() => undefined);
    const forbidden = new CatchForbidden();

    await fail(new Error('boom'), (config) => config.useGlobalFilters(forbidden));

    expect(forbidden.catch).not.toHaveBeenCalled();
    expect(base).toHaveBeenCalledTimes(1);
    base.mockRestore();
  });
});

describe('ExpressParamsFactory', () => {
  const request = {
    body: { seconds: 5 },
    params: { leaseId: 'x' },
    query: { wait: 'true' },
    headers: { 'x-request-id': 'r1' },
    ip: '127.0.0.1',
  } as unknown as Request;
  const response = {} as Response;
  const next = (() => undefined) as NextFunction;
  const args: [Request, Response, NextFunction] = [request, response, next];
  const value = (type: RouteParamtypes, data?: string) =>
    new ExpressParamsFactory().exchangeKeyForValue(type, data as string, args);

  it('reads what Nest route parameters read', () => {
    expect(value(RouteParamtypes.REQUEST)).toBe(request);
    expect(value(RouteParamtypes.RESPONSE)).toBe(response);
    expect(value(RouteParamtypes.NEXT)).toBe(next);
    expect(value(RouteParamtypes.BODY)).toBe(request.body);
    expect(value(RouteParamtypes.BODY, 'seconds')).toBe(5);
    expect(value(RouteParamtypes.PARAM, 'leaseId')).toBe('x');
    expect(value(RouteParamtypes.QUERY, 'wait')).toBe('true');
    expect(value(RouteParamtypes.HEADERS, 'X-Request-Id')).toBe('r1');
    expect(value(RouteParamtypes.IP)).toBe('127.0.0.1');
  });
});
