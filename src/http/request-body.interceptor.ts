import {
  CallHandler,
  createParamDecorator,
  ExecutionContext,
  Inject,
  Injectable,
  NestInterceptor,
  PayloadTooLargeException,
  PipeTransform,
  SetMetadata,
  Type,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { from, Observable, switchMap } from 'rxjs';
import { JSON_MAX_DEPTH } from '../common/input';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { BODY_LIMIT_KEY, BodyLimit, bodyLimitBytes } from './body-limit.decorator';
import { assertNoBody, BodyAbortedError, BodyLimits, parseJsonBody, readBody, SlowBodyException } from './request-body';

const OWN_BODY = 'leasehold:own-body';

/** Pipes run after the guards too, so a route reading its own body still reads it only once the caller is let in. */
export const ReadsOwnBody = (): MethodDecorator => SetMetadata(OWN_BODY, true);

export function readsOwnBody(handler: object): boolean {
  return Reflect.getMetadata(OWN_BODY, handler) === true;
}

/** Bodies nest this much deeper than the payloads in them (items, item, payload). */
const ENVELOPE_DEPTH = 8;

/** Express's body parsers run before any guard; here a refused caller has not a byte of its body read or inflated. */
export class RequestBodyInterceptor implements NestInterceptor {
  private readonly limits: BodyLimits;

  constructor(
    private readonly reflector: Reflector,
    config: AppConfig,
  ) {
    this.limits = bodyLimitsOf(config);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<Request>();
    if (request.body !== undefined || !hasBody(request)) return next.handle();
    const handler = context.getHandler();
    if (readsOwnBody(handler)) return next.handle();
    const declared = this.reflector.get<BodyLimit | undefined>(BODY_LIMIT_KEY, handler);
    const limit = bodyLimitBytes(declared, this.limits.limit);
    const read = readJsonBody(request, { ...this.limits, limit }).then((body) => {
      if (declared === undefined) assertNoBody(body);
      request.body = body;
    });
    return from(read).pipe(switchMap(() => next.handle()));
  }
}

/** Nothing for no body or a body that is not JSON, as Express's JSON parser leaves those. */
export async function readJsonBody(request: Request, limits: BodyLimits): Promise<unknown> {
  const body = await readBody(request, limits);
  return body !== undefined && isJson(request) ? parseJsonBody(body, limits) : undefined;
}

interface BodySource {
  request: Request;
  limit: BodyLimit | undefined;
}

const RequestBodySource = createParamDecorator((_data: unknown, context: ExecutionContext): BodySource => ({
  request: context.switchToHttp().getRequest<Request>(),
  limit: Reflect.getMetadata(BODY_LIMIT_KEY, context.getHandler()) as BodyLimit | undefined,
}));

/** Goes with @ReadsOwnBody() on the route. */
export const RawRequestBody = (...pipes: Array<Type<PipeTransform> | PipeTransform>): ParameterDecorator =>
  RequestBodySource(RawBodyPipe, ...pipes);

/** Goes with @ReadsOwnBody() on the route: the body as the global interceptor would have parsed it. */
export const JsonRequestBody = (...pipes: Array<Type<PipeTransform> | PipeTransform>): ParameterDecorator =>
  RequestBodySource(JsonBodyPipe, ...pipes);

class NoBodyPipe implements PipeTransform<unknown, undefined> {
  transform(body: unknown): undefined {
    assertNoBody(body);
    return undefined;
  }
}

/** Goes with @ReadsOwnBody() on a route without a body: one is still bounded and parsed, and refused as elsewhere. */
export const NoRequestBody = (): ParameterDecorator => RequestBodySource(JsonBodyPipe, new NoBodyPipe());

@Injectable()
export class JsonBodyPipe implements PipeTransform<BodySource, Promise<unknown>> {
  private readonly limits: BodyLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = bodyLimitsOf(config);
  }

  transform({ request, limit }: BodySource): Promise<unknown> {
    return readJsonBody(request, { ...this.limits, limit: bodyLimitBytes(limit, this.limits.limit) });
  }
}

/** A client gone before its body arrived must not have work done for it; other read failures mean "no body". */
@Injectable()
export class RawBodyPipe implements PipeTransform<BodySource, Promise<Buffer | undefined>> {
  private readonly limits: BodyLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = bodyLimitsOf(config);
  }

  async transform({ request, limit }: BodySource): Promise<Buffer | undefined> {
    try {
      return await readBody(request, { ...this.limits, limit: bodyLimitBytes(limit, this.limits.limit) });
    } catch (error) {
      if (
        error instanceof PayloadTooLargeException ||
        error instanceof BodyAbortedError ||
        error instanceof SlowBodyException
      ) {
        throw error;
      }
      return undefined;
    }
  }
}

export function bodyLimitsOf(config: AppConfig): BodyLimits {
  return {
    limit: config.bodyLimitBytes,
    maxInflateRatio: config.limits.bodyMaxInflateRatio,
    maxJsonElements: config.limits.bodyMaxJsonValues,
    maxJsonDepth: JSON_MAX_DEPTH + ENVELOPE_DEPTH,
    minBytesPerSecond: config.http.bodyMinBytesPerSecond,
    minRateGraceMs: config.http.bodyMinRateGraceMs,
  };
}

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  return length !== undefined ? length !== '0' : request.headers['transfer-encoding'] !== undefined;
}

function isJson(request: Request): boolean {
  return request.is(['application/json', 'application/*+json']) !== false;
}
