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
import { BodyAbortedError, BodyLimits, parseJsonBody, readBody } from './request-body';

const OWN_BODY = 'leasehold:own-body';

/**
 * The route reads its body itself, through a parameter (RawRequestBody), so
 * this interceptor leaves it alone. Pipes run after the guards, as this
 * interceptor does, so the body is still read only once the caller is let in.
 */
export const ReadsOwnBody = (): MethodDecorator => SetMetadata(OWN_BODY, true);

/** Bodies nest this much deeper than the payloads in them (items, item, payload). */
const ENVELOPE_DEPTH = 8;

/**
 * Reads request bodies after the guards have run, never before: a caller
 * without a valid token or the route's role is refused from its headers,
 * and not a byte of its body is read, inflated or parsed. (Express's body
 * parsers are middleware, which runs before any guard.) Nest's own upload
 * handling reads multipart bodies in an interceptor for the same reason.
 *
 * JSON bodies (application/json, application/*+json) are measured before
 * they are parsed (BODY_MAX_JSON_VALUES, nesting); any other content-type
 * is read only to hold it to BODY_LIMIT, then dropped.
 */
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
    if (this.reflector.get<boolean | undefined>(OWN_BODY, handler) === true) return next.handle();
    const limit = bodyLimitBytes(this.reflector.get<BodyLimit | undefined>(BODY_LIMIT_KEY, handler), this.limits.limit);
    return from(this.readJson(request, { ...this.limits, limit })).pipe(switchMap(() => next.handle()));
  }

  private async readJson(request: Request, limits: BodyLimits): Promise<void> {
    const body = await readBody(request, limits);
    request.body = body !== undefined && isJson(request) ? parseJsonBody(body, limits) : undefined;
  }
}

interface BodySource {
  request: Request;
  /** The route's @AcceptsBody bound. */
  limit: BodyLimit | undefined;
}

/** The request and its route's body bound, for the pipe that reads it. */
const RequestBodySource = createParamDecorator((_data: unknown, context: ExecutionContext): BodySource => ({
  request: context.switchToHttp().getRequest<Request>(),
  limit: Reflect.getMetadata(BODY_LIMIT_KEY, context.getHandler()) as BodyLimit | undefined,
}));

/**
 * The body's bytes (or undefined), read when the route's pipes run, then
 * passed through `pipes`. Goes with @ReadsOwnBody() on the route.
 */
export const RawRequestBody = (...pipes: Array<Type<PipeTransform> | PipeTransform>): ParameterDecorator =>
  RequestBodySource(RawBodyPipe, ...pipes);

/**
 * Reads the body whole within the route's bound. Only an oversized body, or
 * a client gone before its body arrived (who must not have work done for
 * it), is an error here; any other failure to read the body means "no body".
 */
@Injectable()
export class RawBodyPipe implements PipeTransform<BodySource, Promise<Buffer | undefined>> {
  private readonly limits: BodyLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = bodyLimitsOf(config);
  }

  async transform({ request, limit }: BodySource): Promise<Buffer | undefined> {
    // readBody answers undefined for a request without a body.
    try {
      return await readBody(request, { ...this.limits, limit: bodyLimitBytes(limit, this.limits.limit) });
    } catch (error) {
      if (error instanceof PayloadTooLargeException || error instanceof BodyAbortedError) throw error;
      return undefined;
    }
  }
}

/** The bounds every JSON body is held to, whichever route and path reads it. */
export function bodyLimitsOf(config: AppConfig): BodyLimits {
  return {
    limit: config.bodyLimitBytes,
    maxInflateRatio: config.limits.bodyMaxInflateRatio,
    maxJsonElements: config.limits.bodyMaxJsonValues,
    maxJsonDepth: JSON_MAX_DEPTH + ENVELOPE_DEPTH,
  };
}

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  return length !== undefined ? length !== '0' : request.headers['transfer-encoding'] !== undefined;
}

function isJson(request: Request): boolean {
  return request.is(['application/json', 'application/*+json']) !== false;
}
