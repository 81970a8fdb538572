import {
  ArgumentsHost,
  ExceptionFilter,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  NestMiddleware,
  ParamData,
  RequestMethod,
  Type,
} from '@nestjs/common';
// Nest's route metadata keys and parameter kinds: @nestjs/common's own, stable, not re-exported at its root.
import {
  CUSTOM_ROUTE_ARGS_METADATA,
  EXCEPTION_FILTERS_METADATA,
  FILTER_CATCH_EXCEPTIONS,
  GUARDS_METADATA,
  HEADERS_METADATA,
  HTTP_CODE_METADATA,
  INTERCEPTORS_METADATA,
  METHOD_METADATA,
  PIPES_METADATA,
  REDIRECT_METADATA,
  ROUTE_ARGS_METADATA,
  SSE_METADATA,
} from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import {
  ApplicationConfig,
  BaseExceptionFilter,
  ExternalContextCreator,
  HttpAdapterHost,
  ModuleRef,
  ParamsFactory,
} from '@nestjs/core';
import type { NextFunction, Request, Response } from 'express';
import { JsonText } from '../common/json-text';
import { LaterAnswer, LaterListener } from '../common/later-answer';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { readsOwnBody, RequestBodyInterceptor } from './request-body.interceptor';

export interface FastRoute {
  controller: Type<object>;
  handler: string;
  match(request: { method?: string; url?: string }): Record<string, string> | null;
}

export const FAST_ROUTES = Symbol('FAST_ROUTES');

type RouteHandler = (request: Request, response: Response, next: NextFunction) => Promise<unknown>;

interface Served {
  handler: RouteHandler;
  status: number;
  /** The route declares NoContentWhenEmptyInterceptor, whose answer this path writes itself. */
  noContentWhenEmpty: boolean;
}

/** Route interceptors whose whole effect this path reproduces (see send). */
const REPRODUCED_INTERCEPTORS: ReadonlySet<unknown> = new Set([NoContentWhenEmptyInterceptor]);

const SERVED_PARAMS = new Set<number>([
  RouteParamtypes.REQUEST,
  RouteParamtypes.RESPONSE,
  RouteParamtypes.NEXT,
  RouteParamtypes.BODY,
  RouteParamtypes.PARAM,
  RouteParamtypes.QUERY,
  RouteParamtypes.HEADERS,
  RouteParamtypes.IP,
]);

const ROUTE_ENHANCERS: ReadonlyArray<[string, string]> = [
  [GUARDS_METADATA, 'guards'],
  [INTERCEPTORS_METADATA, 'interceptors'],
  [PIPES_METADATA, 'pipes'],
  [EXCEPTION_FILTERS_METADATA, 'exception filters'],
];

/** What Nest's router does with the answer that this path does not. */
const ROUTE_ANSWERS: ReadonlyArray<[string, string]> = [
  [HEADERS_METADATA, 'response headers'],
  [REDIRECT_METADATA, 'a redirect'],
  [SSE_METADATA, 'server-sent events'],
];

export class ExpressParamsFactory implements ParamsFactory {
  exchangeKeyForValue(
    type: number,
    data: ParamData,
    [request, response, next]: [Request, Response, NextFunction],
  ): unknown {
    const key = typeof data === 'string' ? data : undefined;
    const pick = (source: Record<string, unknown> | undefined) =>
      key === undefined || source === undefined ? source : source[key];
    switch (type as RouteParamtypes) {
      case RouteParamtypes.REQUEST:
        return request;
      case RouteParamtypes.RESPONSE:
        return response;
      case RouteParamtypes.NEXT:
        return next;
      case RouteParamtypes.BODY:
        return pick(request.body as Record<string, unknown> | undefined);
      case RouteParamtypes.PARAM:
        return pick(request.params);
      case RouteParamtypes.QUERY:
        return pick(request.query);
      case RouteParamtypes.HEADERS:
        return key === undefined ? request.headers : request.headers[key.toLowerCase()];
      case RouteParamtypes.IP:
        return request.ip;
      default:
        return undefined;
    }
  }
}

/**
 * Express's dispatch and Nest's interceptor chain cost the hottest routes more than their own work. Steps aside for
 * what it does not run: global interceptors, a prefix, versioning, request-scoped or route-level enhancers.
 */
@Injectable()
export class FastPathMiddleware implements NestMiddleware {
  private readonly logger = new Logger(FastPathMiddleware.name);
  private readonly served = new Map<FastRoute, Served | null>();
  private unhandled?: BaseExceptionFilter;

  constructor(
    @Inject(FAST_ROUTES) private readonly routes: readonly FastRoute[],
    private readonly moduleRef: ModuleRef,
    private readonly contexts: ExternalContextCreator,
    private readonly applicationConfig: ApplicationConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  accepts(request: { method?: string; url?: string }): boolean {
    return this.routes.some((route) => route.match(request) !== null);
  }

  use(request: Request, response: Response, next: NextFunction): void {
    for (const route of this.routes) {
      const params = route.match(request);
      if (params === null) continue;
      const served = this.servedFor(route);
      if (!served) return next();
      request.params = params;
      void this.serve(served, request, response, next);
      return;
    }
    next();
  }

  /** Null when the router serves the route; decided once per route. */
  servedFor(route: FastRoute): Served | null {
    let served = this.served.get(route);
    if (served === undefined) {
      const reason = this.reasonForRouter(route);
      if (reason) this.logger.warn(`The router serves ${routeName(route)}: ${reason}`);
      served = reason ? null : this.create(route);
      this.served.set(route, served);
    }
    return served;
  }

  private create(route: FastRoute): Served {
    const method = handlerOf(route);
    // The module that provides the controller (see LeaseModule), so that the context resolves the route's pipes there.
    const controller = this.moduleRef.get(route.controller, { strict: false });
    this.unhandled ??= new BaseExceptionFilter(this.adapterHost.httpAdapter);
    const handler = this.contexts.create(
      controller,
      method,
      route.handler,
      ROUTE_ARGS_METADATA,
      new ExpressParamsFactory(),
      undefined,
      undefined,
      // Interceptors cost the lease route a fifth of its throughput; Nest's filters log and rethrow after answering.
      { guards: true, interceptors: false, filters: false },
    ) as RouteHandler;
    const declared = Reflect.getMetadata(HTTP_CODE_METADATA, method) as number | undefined;
    const post = Reflect.getMetadata(METHOD_METADATA, method) === RequestMethod.POST;
    const noContentWhenEmpty = [route.controller, method].some((target) =>
      enhancersOf(INTERCEPTORS_METADATA, target).includes(NoContentWhenEmptyInterceptor),
    );
    return { handler, status: declared ?? (post ? HttpStatus.CREATED : HttpStatus.OK), noContentWhenEmpty };
  }

  /** No async frame of its own: a route that parks (LaterAnswer) leaves nothing of this call behind while it waits. */
  private serve(served: Served, request: Request, response: Response, next: NextFunction): Promise<void> {
    return served.handler(request, response, next).then(
      (body) => {
        if (body instanceof LaterAnswer) body.listen(new AnswerLater(this, served, request, response, next));
        else this.answer(served, request, response, next, body);
      },
      (error: unknown) => this.fail(error, request, response, next),
    );
  }

  answer(served: Served, request: Request, response: Response, next: NextFunction, body: unknown): void {
    try {
      // A filter that handled a failure has answered already.
      if (!response.headersSent) send(response, served, body);
    } catch (error) {
      this.fail(error, request, response, next);
    }
  }

  /** Nothing may escape as an unhandled rejection: that would stop the broker. */
  fail(error: unknown, request: Request, response: Response, next: NextFunction): void {
    const failed = (failure: unknown) => {
      this.logger.error(`A request could not be answered: ${String(failure)}`);
      response.destroy();
    };
    try {
      Promise.resolve(this.filterFor(error).catch(error, httpHost(request, response, next))).catch(failed);
    } catch (failure) {
      failed(failure);
    }
  }

  /** As Nest's router picks: the last global filter that catches it (the route declares none), else the default. */
  private filterFor(error: unknown): ExceptionFilter {
    const filters = this.applicationConfig.getGlobalFilters();
    for (let index = filters.length - 1; index >= 0; index -= 1) {
      const caught = (Reflect.getMetadata(FILTER_CATCH_EXCEPTIONS, filters[index].constructor) ?? []) as Array<
        abstract new (...args: never[]) => unknown
      >;
      if (caught.length === 0 || caught.some((type) => error instanceof type)) return filters[index];
    }
    return this.unhandled!;
  }

  private reasonForRouter(route: FastRoute): string | undefined {
    const config = this.applicationConfig;
    if (config.getGlobalPrefix()) return 'a global prefix is set';
    if (config.getVersioning()) return 'versioning is enabled';
    const requestScoped = [
      config.getGlobalRequestGuards(),
      config.getGlobalRequestInterceptors(),
      config.getGlobalRequestPipes(),
      config.getGlobalRequestFilters(),
    ];
    if (requestScoped.some((enhancers) => enhancers.length > 0))
      return 'request-scoped global enhancers are registered';
    const interceptors = config.getGlobalInterceptors();
    const readsBodies = (interceptor: unknown) => interceptor instanceof RequestBodyInterceptor;
    if (interceptors.some((interceptor) => !readsBodies(interceptor))) return 'global interceptors are registered';
    const method = handlerOf(route);
    // RequestBodyInterceptor leaves alone a route that reads its own body (@ReadsOwnBody); this path never runs it.
    if (interceptors.some(readsBodies) && !readsOwnBody(method)) return 'RequestBodyInterceptor reads its body';
    for (const target of [route.controller, method]) {
      for (const [key, name] of ROUTE_ENHANCERS) {
        const enhancers = enhancersOf(key, target).filter((enhancer) => !REPRODUCED_INTERCEPTORS.has(enhancer));
        if (enhancers.length > 0) return `the route declares its own ${name}`;
      }
    }
    for (const [key, name] of ROUTE_ANSWERS) {
      const declared = Reflect.getMetadata(key, method) as unknown;
      if (declared !== undefined && !(Array.isArray(declared) && declared.length === 0))
        return `the route declares ${name}`;
    }
    const params = (Reflect.getMetadata(ROUTE_ARGS_METADATA, route.controller, route.handler) ?? {}) as Record<
      string,
      unknown
    >;
    for (const key of Object.keys(params)) {
      // Custom decorators (createParamDecorator) carry their own factory; the rest are `type:index`.
      const [type] = key.split(':');
      if (!key.includes(CUSTOM_ROUTE_ARGS_METADATA) && !SERVED_PARAMS.has(Number(type))) {
        return `the route takes a parameter of kind ${type}`;
      }
    }
    return undefined;
  }
}

/** What a parked request keeps of this path: the route and the exchange, until its LaterAnswer settles. */
class AnswerLater implements LaterListener<unknown> {
  constructor(
    private readonly path: FastPathMiddleware,
    private readonly served: Served,
    private readonly request: Request,
    private readonly response: Response,
    private readonly next: NextFunction,
  ) {}

  answered(body: unknown): void {
    this.path.answer(this.served, this.request, this.response, this.next, body);
  }

  failed(error: unknown): void {
    this.path.fail(error, this.request, this.response, this.next);
  }
}

function handlerOf(route: FastRoute): (...args: unknown[]) => unknown {
  return (route.controller.prototype as Record<string, (...args: unknown[]) => unknown>)[route.handler];
}

function routeName(route: FastRoute): string {
  return `${route.controller.name}.${route.handler}`;
}

function enhancersOf(key: string, target: object): unknown[] {
  return (Reflect.getMetadata(key, target) as unknown[] | undefined) ?? [];
}

/** What Express's res.json (or res.send of a JsonText's text) sends; written directly, it costs a tenth less. */
function send(response: Response, served: Served, body: unknown): void {
  if (body === undefined || body === null) {
    response.statusCode = served.noContentWhenEmpty ? HttpStatus.NO_CONTENT : served.status;
    response.end();
    return;
  }
  const json = body instanceof JsonText ? body.text : JSON.stringify(body);
  response.statusCode = served.status;
  response.setHeader('Content-Type', 'application/json; charset=utf-8');
  response.setHeader('Content-Length', Buffer.byteLength(json));
  response.end(json);
}

function httpHost(request: Request, response: Response, next: NextFunction): ArgumentsHost {
  const args = [request, response, next];
  const http = { getRequest: () => request, getResponse: () => response, getNext: () => next };
  return {
    getArgs: () => args as never,
    getArgByIndex: (index: number) => args[index] as never,
    switchToHttp: () => http as never,
    switchToRpc: () => {
      throw new Error('not an RPC context');
    },
    switchToWs: () => {
      throw new Error('not a WebSocket context');
    },
    getType: () => 'http' as never,
  };
}
