import {
  ArgumentsHost,
  ExceptionFilter,
  HttpStatus,
  Injectable,
  Logger,
  NestMiddleware,
  ParamData,
} from '@nestjs/common';
// Nest's route metadata keys and parameter kinds: @nestjs/common's own, stable, not re-exported at its root.
import {
  CUSTOM_ROUTE_ARGS_METADATA,
  EXCEPTION_FILTERS_METADATA,
  FILTER_CATCH_EXCEPTIONS,
  GUARDS_METADATA,
  INTERCEPTORS_METADATA,
  PIPES_METADATA,
  ROUTE_ARGS_METADATA,
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
import { RequestBodyInterceptor } from '../http/request-body.interceptor';
import { LeaseController } from './lease.controller';
import { leaseIdFromSegment, matchLeaseExtendRequest } from './lease-route';

type LeaseHandler = (request: Request, response: Response, next: NextFunction) => Promise<unknown>;

/** Nest calls it on the controller, never unbound. */
// eslint-disable-next-line @typescript-eslint/unbound-method
const EXTEND = LeaseController.prototype.extend as (...args: unknown[]) => unknown;

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
 * Serves the extend route ahead of Express's router, which cost the route more than its renewal; it steps aside for
 * what it does not run (global interceptors, a prefix, versioning, request-scoped or route-level enhancers).
 */
@Injectable()
export class LeaseFastPathMiddleware implements NestMiddleware {
  private readonly logger = new Logger(LeaseFastPathMiddleware.name);
  private handler?: LeaseHandler | null;
  private unhandled?: BaseExceptionFilter;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly contexts: ExternalContextCreator,
    private readonly applicationConfig: ApplicationConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  use(request: Request, response: Response, next: NextFunction): void {
    const lease = matchLeaseExtendRequest(request);
    // An empty id does not match the route's `:leaseId`; the router answers 404.
    if (!lease || lease.segment === '') return next();
    const handler = this.leaseHandler();
    if (!handler) return next();
    request.params = { leaseId: leaseIdFromSegment(lease.segment) };
    void this.serve(handler, request, response, next);
  }

  leaseHandler(): LeaseHandler | null {
    if (this.handler === undefined) {
      const reason = this.reasonForRouter();
      if (reason) {
        this.logger.warn(`The router serves the lease route: ${reason}`);
        this.handler = null;
      } else {
        // The provider (see LeaseModule), so that the context resolves the route's pipes in its module.
        const controller = this.moduleRef.get(LeaseController);
        this.handler = this.contexts.create(
          controller,
          EXTEND,
          'extend',
          ROUTE_ARGS_METADATA,
          new ExpressParamsFactory(),
          undefined,
          undefined,
          // Nest's interceptor chain costs a fifth of this route's throughput; none is needed here (see
          // below). Its external exception handling is made for contexts whose filters return the
          // answer (it logs and rethrows after an HTTP filter has answered): failures are caught here.
          { guards: true, interceptors: false, filters: false },
        ) as LeaseHandler;
        this.unhandled = new BaseExceptionFilter(this.adapterHost.httpAdapter);
      }
    }
    return this.handler;
  }

  private async serve(handler: LeaseHandler, request: Request, response: Response, next: NextFunction): Promise<void> {
    try {
      const body = await handler(request, response, next);
      // A filter that handled a failure has answered already.
      if (!response.headersSent) sendJson(response, body);
    } catch (error) {
      try {
        await this.filterFor(error).catch(error, httpHost(request, response, next));
      } catch (failure) {
        // Nothing may escape as an unhandled rejection: that would stop the broker.
        this.logger.error(`A lease request could not be answered: ${String(failure)}`);
        response.destroy();
      }
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

  private reasonForRouter(): string | undefined {
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
    // RequestBodyInterceptor leaves this route's body to its own pipe (@ReadsOwnBody), so it has nothing to do here.
    const interceptors = config
      .getGlobalInterceptors()
      .filter((interceptor) => !(interceptor instanceof RequestBodyInterceptor));
    if (interceptors.length > 0) return 'global interceptors are registered';
    for (const target of [LeaseController, EXTEND]) {
      for (const [key, name] of ROUTE_ENHANCERS) {
        const enhancers = Reflect.getMetadata(key, target) as unknown[] | undefined;
        if (enhancers && enhancers.length > 0) return `the lease route declares its own ${name}`;
      }
    }
    const params = (Reflect.getMetadata(ROUTE_ARGS_METADATA, LeaseController, 'extend') ?? {}) as Record<
      string,
      unknown
    >;
    for (const key of Object.keys(params)) {
      // Custom decorators (createParamDecorator) carry their own factory; the rest are `type:index`.
      const [type] = key.split(':');
      if (!key.includes(CUSTOM_ROUTE_ARGS_METADATA) && !SERVED_PARAMS.has(Number(type))) {
        return `the lease route takes a parameter of kind ${type}`;
      }
    }
    return undefined;
  }
}

/** What Express's res.json sends for this route; written directly, it costs a tenth less. */
function sendJson(response: Response, body: unknown): void {
  const json = JSON.stringify(body);
  response.statusCode = HttpStatus.OK;
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
