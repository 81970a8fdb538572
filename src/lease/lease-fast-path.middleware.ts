import {
  CanActivate,
  ExceptionFilter,
  ForbiddenException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  NestMiddleware,
  OnModuleInit,
} from '@nestjs/common';
import {
  EXCEPTION_FILTERS_METADATA,
  FILTER_CATCH_EXCEPTIONS,
  GUARDS_METADATA,
  INTERCEPTORS_METADATA,
  PIPES_METADATA,
} from '@nestjs/common/constants';
import { ApplicationConfig, ModuleRef } from '@nestjs/core';
import { FORBIDDEN_MESSAGE } from '@nestjs/core/guards/constants';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import type { NextFunction, Request, Response } from 'express';
import { isObservable, lastValueFrom } from 'rxjs';
import { tenantIdOf } from '../auth/principal.decorator';
import { LEASE_EXTEND_URL, leaseIdFromSegment } from '../common/lease-extend-url';
import { LenientSecondsPipe } from '../common/lenient-seconds.pipe';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { RequestBodyInterceptor } from '../http/request-body.interceptor';
import { LeaseController } from './lease.controller';

/** What Nest would run around LeaseController.extend in this application. */
export interface LeaseFastPathPipeline {
  guards: CanActivate[];
  filter: ExceptionFilter;
}

const ROUTE_ENHANCERS: ReadonlyArray<[string, string]> = [
  [GUARDS_METADATA, 'guards'],
  [INTERCEPTORS_METADATA, 'interceptors'],
  [PIPES_METADATA, 'pipes'],
  [EXCEPTION_FILTERS_METADATA, 'exception filters'],
];

/**
 * Serves `POST /api/v1/lease/:leaseId/extend` ahead of Express's router.
 *
 * Consumers renew on a timer, so this is the request the broker answers most,
 * and the router cost it more than the renewal: Express walks every layer in
 * front of the route (Swagger's among them) and Nest builds an execution
 * context, a parameter list and a reply for each call. This middleware runs
 * the same pieces directly: the application's global guards with the route's
 * own execution context (so the guard reads the route's @Access level and
 * resolves the tenant exactly as it does for the router), the route's lenient
 * pipe, LeaseController.extend, and the global exception filter for any
 * failure. It answers with the status and headers Express would.
 *
 * It steps aside, and the router serves the request as it would without it,
 * for whatever it does not reproduce: a body that is compressed, chunked or
 * over the limit (the body parser's errors stay the body parser's), and an
 * application with global pipes or interceptors, request-scoped enhancers, a
 * global prefix, versioning, enhancers on the route itself, or anything but
 * one catch-all exception filter. That check runs once, on the first lease
 * request, when the application is fully set up, and its verdict is logged.
 *
 * Express middleware installed after it (setupApp's order) and Nest module
 * middleware never see the lease requests it serves: anything every request
 * must pass through goes in front of it in setupApp.
 */
@Injectable()
export class LeaseFastPathMiddleware implements NestMiddleware, OnModuleInit {
  private readonly logger = new Logger(LeaseFastPathMiddleware.name);
  private readonly pipe = new LenientSecondsPipe();
  private readonly bodyLimit: number;
  private controller!: LeaseController;
  private pipeline?: LeaseFastPathPipeline | null;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly applicationConfig: ApplicationConfig,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.bodyLimit = config.bodyLimitBytes;
  }

  onModuleInit(): void {
    // The router's own instance: controllers are not injectable into providers.
    this.controller = this.moduleRef.get(LeaseController);
  }

  use(request: Request, response: Response, next: NextFunction): void {
    if (request.method !== 'POST') return next();
    const lease = LEASE_EXTEND_URL.exec(request.url);
    // An empty id does not match the route's `:leaseId`; the router answers 404.
    if (!lease || lease[2] === '') return next();
    const length = plainBodyLength(request, this.bodyLimit);
    const pipeline = this.activePipeline();
    if (length === undefined || !pipeline) return next();

    void this.serve(pipeline, request, response, next, leaseIdFromSegment(lease[2]), length);
  }

  /** Whether this application's lease requests are served here; decided once. */
  activePipeline(): LeaseFastPathPipeline | null {
    if (this.pipeline === undefined) {
      const pipeline = this.resolvePipeline();
      if (typeof pipeline === 'string') {
        this.logger.warn(`The router serves the lease route: ${pipeline}`);
        this.pipeline = null;
      } else {
        this.pipeline = pipeline;
      }
    }
    return this.pipeline;
  }

  private async serve(
    pipeline: LeaseFastPathPipeline,
    request: Request,
    response: Response,
    next: NextFunction,
    leaseId: string,
    length: number | null,
  ): Promise<void> {
    // The same context Nest gives the guards and the filter for this route.
    const context = new ExecutionContextHost([request, response, next], LeaseController, LeaseController.prototype.extend);
    try {
      for (const guard of pipeline.guards) {
        if (!(await activated(guard.canActivate(context)))) {
          throw new ForbiddenException(FORBIDDEN_MESSAGE);
        }
      }
      // Read only once the guards let the caller in, as RequestBodyInterceptor does on the router.
      const body = await readBody(request, length);
      const answer = await this.controller.extend(tenantIdOf(request), leaseId, this.pipe.transform(body), response);
      sendJson(response, answer);
    } catch (error) {
      pipeline.filter.catch(error, context);
    }
  }

  /** The pipeline to run, or why this application's lease route must go through the router. */
  private resolvePipeline(): LeaseFastPathPipeline | string {
    const config = this.applicationConfig;
    if (config.getGlobalPrefix()) return 'a global prefix is set';
    if (config.getVersioning()) return 'versioning is enabled';
    if (config.getGlobalPipes().length > 0) return 'global pipes are registered';
    // RequestBodyInterceptor is reproduced here: the body is read after the guards.
    const interceptors = config.getGlobalInterceptors().filter((interceptor) => !(interceptor instanceof RequestBodyInterceptor));
    if (interceptors.length > 0) return 'global interceptors are registered';
    const requestScoped = [
      config.getGlobalRequestGuards(),
      config.getGlobalRequestInterceptors(),
      config.getGlobalRequestPipes(),
      config.getGlobalRequestFilters(),
    ];
    if (requestScoped.some((enhancers) => enhancers.length > 0)) return 'request-scoped global enhancers are registered';
    for (const target of [LeaseController, LeaseController.prototype.extend]) {
      for (const [key, name] of ROUTE_ENHANCERS) {
        const enhancers = Reflect.getMetadata(key, target) as unknown[] | undefined;
        if (enhancers && enhancers.length > 0) return `the lease route declares its own ${name}`;
      }
    }
    const filters = config.getGlobalFilters();
    if (filters.length !== 1 || !catchesEverything(filters[0])) {
      return 'the application does not have exactly one catch-all exception filter';
    }
    return { guards: [...config.getGlobalGuards()], filter: filters[0] };
  }
}

function catchesEverything(filter: ExceptionFilter): boolean {
  const types = Reflect.getMetadata(FILTER_CATCH_EXCEPTIONS, filter.constructor) as unknown[] | undefined;
  return !types || types.length === 0;
}

/** A guard's verdict, which may be a boolean, a promise or an observable, as Nest accepts. */
async function activated(result: boolean | Promise<boolean> | object): Promise<boolean> {
  if (typeof result === 'boolean') return result;
  const value: unknown = await result;
  return Boolean(isObservable(value) ? await lastValueFrom(value) : value);
}

/**
 * The declared length of a body this path may read itself: `null` for no
 * body, a byte count for an uncompressed body within the limit, undefined
 * for anything else (compressed, chunked, too large), which is left to the
 * router's body parser and its 413.
 */
function plainBodyLength(request: Request, limit: number): number | null | undefined {
  const { 'content-encoding': encoding, 'transfer-encoding': transfer, 'content-length': declared } = request.headers;
  if (transfer !== undefined) return undefined;
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return undefined;
  if (declared === undefined) return null;
  const length = Number(declared);
  return Number.isSafeInteger(length) && length <= limit ? length : undefined;
}

/**
 * The body, once complete. A request whose client goes away before the end
 * never completes, so nothing is renewed for a caller that would not hear the
 * answer.
 */
function readBody(request: Request, length: number | null): Promise<Buffer | undefined> {
  if (length === null) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    request.on('data', (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
    });
    request.once('end', () => resolve(Buffer.concat(chunks, received)));
  });
}

/** What `response.json` would send: 200, JSON in UTF-8, and its length. */
function sendJson(response: Response, body: unknown): void {
  const json = JSON.stringify(body);
  response.statusCode = HttpStatus.OK;
  response.setHeader('Content-Type', 'application/json; charset=utf-8');
  response.setHeader('Content-Length', Buffer.byteLength(json));
  response.end(json);
}
