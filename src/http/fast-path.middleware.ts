import {
  ArgumentsHost,
  ExceptionFilter,
  HttpStatus,
  Injectable,
  Logger,
  NestMiddleware,
  OnApplicationBootstrap,
  ParamData,
  RequestMethod,
} from '@nestjs/common';
// Nest's route metadata keys and parameter kinds: @nestjs/common's own, stable, not re-exported at its root.
import {
  CUSTOM_ROUTE_ARGS_METADATA,
  EXCEPTION_FILTERS_METADATA,
  FILTER_CATCH_EXCEPTIONS,
  GUARDS_METADATA,
  HEADERS_METADATA,
  HOST_METADATA,
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
  ParamsFactory,
} from '@nestjs/core';
import type { NextFunction, Request, Response } from 'express';
import { JsonText } from '../common/json-text';
import { LaterAnswer, LaterListener } from '../common/later-answer';
import { NoContentWhenEmptyInterceptor } from '../common/no-content.interceptor';
import { FastRouteEntry, FastRouteTable, fastRouteError } from './fast-route-table';
import { readsOwnBody, RequestBodyInterceptor } from './request-body.interceptor';
import { MatchedRoute, RouteMatcher } from './route-matcher';

type RouteHandler = (request: Request, response: Response, next: NextFunction) => Promise<unknown>;

interface ServedRoute extends MatchedRoute {
  handler: RouteHandler;
  status: number;
  /** The route declares NoContentWhenEmptyInterceptor, whose answer this path writes itself. */
  noContentWhenEmpty: boolean;
  /** Requests served; the counter reads it at each scrape, so that serving one costs an addition. */
  served: number;
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
 * Express's dispatch and Nest's interceptor chain cost the hottest routes more than their own work. Serves the
 * handlers marked @FastRoute(), and refuses to start when one of them needs what it does not run.
 */
@Injectable()
export class FastPathMiddleware implements NestMiddleware, OnApplicationBootstrap {
  private readonly logger = new Logger(FastPathMiddleware.name);
  private matcher = new RouteMatcher<ServedRoute>([]);
  private enabled = false;
  private unhandled?: BaseExceptionFilter;

  constructor(
    private readonly table: FastRouteTable,
    private readonly contexts: ExternalContextCreator,
    private readonly applicationConfig: ApplicationConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** Each route served and how many requests it served. */
  get routes(): ReadonlyArray<{ readonly path: string; readonly served: number }> {
    return this.matcher.routes;
  }

  /** The application serves its fast routes here (setupApp); without this call the router serves them. */
  enable(): void {
    this.enabled = true;
  }

  /** Once the application is set up (global enhancers, prefix) and before any request. */
  onApplicationBootstrap(): void {
    if (!this.enabled) return;
    const refused = this.table.routes.flatMap((route) => {
      const reason = this.reasonForRouter(route);
      return reason ? [fastRouteError(route.name, reason).message] : [];
    });
    if (refused.length > 0) throw new Error(refused.join('; '));
    this.unhandled = new BaseExceptionFilter(this.adapterHost.httpAdapter);
    this.matcher = new RouteMatcher(this.table.routes.map((route) => this.create(route)));
  }

  accepts(request: { method?: string; url?: string }): boolean {
    return this.matcher.match(request) !== null;
  }

  use(request: Request, response: Response, next: NextFunction): void {
    const matched = this.matcher.match(request);
    if (matched === null) return next();
    request.params = matched.params;
    matched.route.served += 1;
    void this.serve(matched.route, request, response, next);
  }

  private create(route: FastRouteEntry): ServedRoute {
    const method = handlerOf(route);
    const handler = this.contexts.create(
      // The provider of the controller's module (see LeaseModule), so that the context resolves the route's pipes there.
      route.host!.providers.get(route.controller)!.instance as object,
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
    return {
      method: route.method,
      path: route.path,
      keepsUndecodable: route.keepsUndecodable,
      handler,
      status: declared ?? (post ? HttpStatus.CREATED : HttpStatus.OK),
      noContentWhenEmpty,
      served: 0,
    };
  }

  /** No async frame of its own: a route that parks (LaterAnswer) leaves nothing of this call behind while it waits. */
  private serve(served: ServedRoute, request: Request, response: Response, next: NextFunction): Promise<void> {
    return served.handler(request, response, next).then(
      (body) => {
        if (body instanceof LaterAnswer) body.listen(new AnswerLater(this, served, request, response, next));
        else this.answer(served, request, response, next, body);
      },
      (error: unknown) => this.fail(error, request, response, next),
    );
  }

  answer(served: ServedRoute, request: Request, response: Response, next: NextFunction, body: unknown): void {
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

  private reasonForRouter(route: FastRouteEntry): string | undefined {
    const config = this.applicationConfig;
    if (config.getVersioning()) return 'versioning is enabled';
    if (Reflect.getMetadata(HOST_METADATA, route.controller) !== undefined) return 'its controller is bound to a host';
    if (!route.host?.providers.has(route.controller)) {
      return `${route.controller.name} is not also a provider of its module, where Nest resolves the route's pipes`;
    }
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
        return `the route takes a parameter of kind ${RouteParamtypes[Number(type)] ?? type}`;
      }
    }
    return undefined;
  }
}

/** What a parked request keeps of this path: the route and the exchange, until its LaterAnswer settles. */
class AnswerLater implements LaterListener<unknown> {
  constructor(
    private readonly path: FastPathMiddleware,
    private readonly served: ServedRoute,
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

function handlerOf(route: FastRouteEntry): (...args: unknown[]) => unknown {
  return (route.controller.prototype as Record<string, (...args: unknown[]) => unknown>)[route.handler];
}

function enhancersOf(key: string, target: object): unknown[] {
  return (Reflect.getMetadata(key, target) as unknown[] | undefined) ?? [];
}

/** What Express's res.json (or res.send of a JsonText's text) sends; written directly, it costs a tenth less. */
function send(response: Response, served: ServedRoute, body: unknown): void {
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
