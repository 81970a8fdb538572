import {
  CanActivate,
  Catch,
  ExceptionFilter,
  ForbiddenException,
  Get,
  HttpCode,
  HttpStatus,
  Logger,
  PipeTransform,
  Post,
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
import {
  ApplicationConfig,
  BaseExceptionFilter,
  ExternalContextCreator,
  HttpAdapterHost,
  ModuleRef,
} from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { NextFunction, Request, Response } from 'express';
import { AppConfig } from '../config/app-config';
import { FAST_ROUTE_TABLE } from '../fast-routes';
import { LeaseController } from '../lease/lease.controller';
import { JsonText } from '../common/json-text';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { PopController } from '../pop/pop.controller';
import { PushController } from '../push/push.controller';
import { ExpressParamsFactory, FastPathMiddleware } from './fast-path.middleware';
import { RequestBodyInterceptor } from './request-body.interceptor';

const [LEASE, PUSH] = FAST_ROUTE_TABLE;
const POP_PARTITION = FAST_ROUTE_TABLE.find((route) => route.handler === 'popPartition')!;

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

function middlewareFor(
  configure: (config: ApplicationConfig) => void = () => undefined,
  answer: () => unknown = () => ({ renewed: 1 }),
) {
  const config = new ApplicationConfig();
  configure(config);
  const handler = jest.fn(async () => answer());
  const contexts = { create: jest.fn(() => handler) } as unknown as ExternalContextCreator;
  const controller = {};
  const moduleRef = { get: jest.fn(() => controller) } as unknown as ModuleRef;
  const adapterHost = { httpAdapter: {} } as HttpAdapterHost;
  return {
    middleware: new FastPathMiddleware(FAST_ROUTE_TABLE, moduleRef, contexts, config, adapterHost),
    contexts,
    controller,
    config,
  };
}

describe('FastPathMiddleware.servedFor', () => {
  let warn: jest.SpyInstance;

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(() => {
    jest.restoreAllMocks();
  });

  it("calls the route's own handler on its controller in Nest's context: guards, pipes and filters, no interceptor chain", () => {
    const { middleware, contexts, controller } = middlewareFor((config) => {
      config.useGlobalGuards(new Allow());
      config.useGlobalPipes(new Identity());
      config.useGlobalInterceptors(new RequestBodyInterceptor({} as never, CONFIG));
    });

    expect(middleware.servedFor(LEASE)).not.toBeNull();
    expect(contexts.create).toHaveBeenCalledWith(
      controller,
      LeaseController.prototype.extend,
      'extend',
      expect.any(String),
      expect.any(ExpressParamsFactory),
      undefined,
      undefined,
      { guards: true, interceptors: false, filters: false },
    );
    expect(warn).not.toHaveBeenCalled();
  });

  it('leaves a route that does not read its own body to the router, which runs RequestBodyInterceptor on it', () => {
    class Plain {
      @Get() read(): void {}
    }
    const { middleware } = middlewareFor((config) =>
      config.useGlobalInterceptors(new RequestBodyInterceptor({} as never, CONFIG)),
    );

    expect(middleware.servedFor({ controller: Plain, handler: 'read', match: () => null })).toBeNull();
    expect(warn).toHaveBeenCalledWith('The router serves Plain.read: RequestBodyInterceptor reads its body');
    for (const route of FAST_ROUTE_TABLE) expect(middleware.servedFor(route)).not.toBeNull();
  });

  it('says why when it leaves the route to the router', () => {
    middlewareFor((config) =>
      config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() }),
    ).middleware.servedFor(LEASE);

    expect(warn).toHaveBeenCalledWith('The router serves LeaseController.extend: global interceptors are registered');
  });

  it.each<[string, (config: ApplicationConfig) => void]>([
    ['a global prefix', (config) => config.setGlobalPrefix('v1')],
    ['versioning', (config) => config.enableVersioning({ type: VersioningType.URI })],
    [
      'a global interceptor',
      (config) => config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() }),
    ],
    ['a request-scoped global guard', (config) => config.addGlobalRequestGuard(new InstanceWrapper())],
    ['a request-scoped global interceptor', (config) => config.addGlobalRequestInterceptor(new InstanceWrapper())],
    ['a request-scoped global pipe', (config) => config.addGlobalRequestPipe(new InstanceWrapper())],
    ['a request-scoped global filter', (config) => config.addGlobalRequestFilter(new InstanceWrapper())],
  ])('leaves the route to the router with %s', (_name, configure) => {
    const { middleware, contexts } = middlewareFor(configure);

    expect(middleware.servedFor(LEASE)).toBeNull();
    expect(middleware.servedFor(PUSH)).toBeNull();
    expect(contexts.create).not.toHaveBeenCalled();
  });

  it.each([
    ['guards', GUARDS_METADATA],
    ['interceptors', INTERCEPTORS_METADATA],
    ['pipes', PIPES_METADATA],
    ['exception filters', EXCEPTION_FILTERS_METADATA],
  ])('leaves the route to the router when the route declares its own %s', (_name, key) => {
    for (const target of [LeaseController, LeaseController.prototype.extend]) {
      Reflect.defineMetadata(key, [Allow], target);
      try {
        expect(middlewareFor().middleware.servedFor(LEASE)).toBeNull();
      } finally {
        Reflect.deleteMetadata(key, target);
      }
    }
  });

  it('decides once', () => {
    const { middleware, contexts, config } = middlewareFor();
    const served = middleware.servedFor(LEASE);

    config.useGlobalInterceptors({ intercept: (_context, next) => next.handle() });

    expect(middleware.servedFor(LEASE)).toBe(served);
    expect(contexts.create).toHaveBeenCalledTimes(1);
  });
  it('serves a route whose only interceptor is NoContentWhenEmptyInterceptor, answering 204 for nothing itself', () => {
    const { middleware } = middlewareFor();

    expect(Reflect.getMetadata(INTERCEPTORS_METADATA, PopController)).toEqual([NoContentWhenEmptyInterceptor]);
    expect(middleware.servedFor(POP_PARTITION)).toMatchObject({ status: 200, noContentWhenEmpty: true });
    expect(middleware.servedFor(PUSH)).toMatchObject({ noContentWhenEmpty: false });
  });

  it('leaves it to the router when another interceptor comes with it', () => {
    Reflect.defineMetadata(INTERCEPTORS_METADATA, [Allow], PopController.prototype.popPartition);
    try {
      expect(middlewareFor().middleware.servedFor(POP_PARTITION)).toBeNull();
    } finally {
      Reflect.deleteMetadata(INTERCEPTORS_METADATA, PopController.prototype.popPartition);
    }
  });

  it.each([
    ['response headers', HEADERS_METADATA, [{ name: 'x-a', value: 'b' }]],
    ['a redirect', REDIRECT_METADATA, { url: '/elsewhere' }],
  ])('leaves the route to the router when it declares %s', (_name, key, value) => {
    Reflect.defineMetadata(key, value, PushController.prototype.push);
    try {
      expect(middlewareFor().middleware.servedFor(PUSH)).toBeNull();
    } finally {
      Reflect.deleteMetadata(key, PushController.prototype.push);
    }
  });

  it("answers with the status the router would: the route's @HttpCode, else 201 for a POST and 200 otherwise", () => {
    class Plain {
      @Post() make(): void {}
      @Post() @HttpCode(HttpStatus.ACCEPTED) accept(): void {}
      @Get() read(): void {}
    }
    const route = (handler: string) => ({ controller: Plain, handler, match: () => null });
    const { middleware } = middlewareFor();

    expect(middleware.servedFor(route('make'))?.status).toBe(201);
    expect(middleware.servedFor(route('accept'))?.status).toBe(202);
    expect(middleware.servedFor(route('read'))?.status).toBe(200);
    expect(middleware.servedFor(LEASE)?.status).toBe(200);
    expect(middleware.servedFor(PUSH)?.status).toBe(201);
  });
});

describe('FastPathMiddleware.use', () => {
  const response = {} as Response;

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
    const { middleware, contexts } = middlewareFor();
    const next = jest.fn();

    middleware.use({ method, url } as Request, response, next);

    expect(next).toHaveBeenCalledTimes(1);
    expect(contexts.create).not.toHaveBeenCalled();
  });

  it("hands the handler the decoded id as the route parameter, and answers with the handler's result", async () => {
    const { middleware } = middlewareFor();
    const request = { method: 'POST', url: '/API/v1/lease/a%20b/extend/?x=1' } as Request;
    const answered = new Promise<string>((resolve) => {
      Object.assign(response, { headersSent: false, statusCode: 0, setHeader: jest.fn(), end: resolve });
    });
    const next = jest.fn();

    middleware.use(request, response, next);

    expect(next).not.toHaveBeenCalled();
    expect(request.params).toEqual({ leaseId: 'a b' });
    expect(await answered).toBe('{"renewed":1}');
    expect(response.statusCode).toBe(200);
  });

  it('serves a push with no route parameters, answering 201', async () => {
    const { middleware } = middlewareFor();
    const request = { method: 'POST', url: '/Api/V1/Push/?x=1' } as Request;
    const pushed = {} as Response;
    const answered = new Promise<string>((resolve) => {
      Object.assign(pushed, { headersSent: false, statusCode: 0, setHeader: jest.fn(), end: resolve });
    });

    middleware.use(request, pushed, jest.fn());

    expect(request.params).toEqual({});
    expect(await answered).toBe('{"renewed":1}');
    expect(pushed.statusCode).toBe(201);
  });
});

describe('FastPathMiddleware.use on a pop route', () => {
  function popWith(answer: unknown) {
    const { middleware } = middlewareFor(undefined, () => answer);
    const request = { method: 'GET', url: '/API/v1/pop/queue/a%2Fb/partition/P%201/?batch=2' } as Request;
    const response = { headersSent: false, statusCode: 0, setHeader: jest.fn() } as unknown as Response;
    const answered = new Promise<unknown>((resolve) => Object.assign(response, { end: resolve }));
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
    const moduleRef = { get: () => ({}) } as unknown as ModuleRef;
    const middleware = new FastPathMiddleware(FAST_ROUTE_TABLE, moduleRef, contexts, config, {
      httpAdapter: {},
    } as HttpAdapterHost);
    const request = { method: 'POST', url: '/api/v1/lease/x/extend' } as Request;
    const serving = jest.spyOn(middleware as never, 'serve');
    middleware.use(request, {} as Response, jest.fn());
    await serving.mock.results[0].value;
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
