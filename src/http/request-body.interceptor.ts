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
import { APP_CONFIG, AppConfig } from '../config/app-config';
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
    payloadDepth: number,
  ) {
    this.limits = bodyLimitsOf(config, payloadDepth + ENVELOPE_DEPTH);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<Request>();
    if (request.body !== undefined || !hasBody(request)) return next.handle();
    if (this.reflector.get<boolean | undefined>(OWN_BODY, context.getHandler()) === true) return next.handle();
    return from(this.readJson(request)).pipe(switchMap(() => next.handle()));
  }

  private async readJson(request: Request): Promise<void> {
    const body = await readBody(request, this.limits);
    request.body = body !== undefined && isJson(request) ? parseJsonBody(body, this.limits) : undefined;
  }
}

/** The request itself, for pipes that read from it. */
const RequestObject = createParamDecorator((_data: unknown, context: ExecutionContext) =>
  context.switchToHttp().getRequest<Request>(),
);

/**
 * The body's bytes (or undefined), read when the route's pipes run, then
 * passed through `pipes`. Goes with @ReadsOwnBody() on the route.
 */
export const RawRequestBody = (...pipes: Array<Type<PipeTransform> | PipeTransform>): ParameterDecorator =>
  RequestObject(RawBodyPipe, ...pipes);

/**
 * Reads the body whole within BODY_LIMIT. Only an oversized body, or a
 * client gone before its body arrived (who must not have work done for it),
 * is an error here; any other failure to read the body means "no body".
 */
@Injectable()
export class RawBodyPipe implements PipeTransform<Request, Promise<Buffer | undefined>> {
  private readonly limits: BodyLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    // Bytes are not parsed here: the JSON limits do not apply.
    this.limits = bodyLimitsOf(config, Number.MAX_SAFE_INTEGER);
  }

  async transform(request: Request): Promise<Buffer | undefined> {
    // readBody answers undefined for a request without a body.
    try {
      return await readBody(request, this.limits);
    } catch (error) {
      if (error instanceof PayloadTooLargeException || error instanceof BodyAbortedError) throw error;
      return undefined;
    }
  }
}

function bodyLimitsOf(config: AppConfig, maxJsonDepth: number): BodyLimits {
  return {
    limit: config.bodyLimitBytes,
    maxInflateRatio: config.limits.bodyMaxInflateRatio,
    maxJsonElements: config.limits.bodyMaxJsonValues,
    maxJsonDepth,
  };
}

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  return length !== undefined ? length !== '0' : request.headers['transfer-encoding'] !== undefined;
}

function isJson(request: Request): boolean {
  return request.is(['application/json', 'application/*+json']) !== false;
}
