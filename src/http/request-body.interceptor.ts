import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  PayloadTooLargeException,
  SetMetadata,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { from, Observable, switchMap } from 'rxjs';
import { AppConfig } from '../config/app-config';
import { BodyAbortedError, BodyLimits, parseJsonBody, readBody } from './request-body';

const RAW_BODY = 'leasehold:raw-body';

/** The handler gets the body's bytes (or undefined) and decides itself what a malformed one means. */
export const RawBody = (): MethodDecorator => SetMetadata(RAW_BODY, true);

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
    this.limits = {
      limit: config.bodyLimitBytes,
      maxInflateRatio: config.limits.bodyMaxInflateRatio,
      maxJsonElements: config.limits.bodyMaxJsonValues,
      maxJsonDepth: payloadDepth + ENVELOPE_DEPTH,
    };
  }

  get bodyLimits(): BodyLimits {
    return this.limits;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<Request>();
    if (request.body !== undefined || !hasBody(request)) return next.handle();
    const raw = this.reflector.get<boolean | undefined>(RAW_BODY, context.getHandler()) === true;
    return from(raw ? this.readRaw(request) : this.readJson(request)).pipe(switchMap(() => next.handle()));
  }

  /**
   * Only an oversized body, or a client gone before its body arrived (who
   * must not have work done for it), is an error here; any other failure to
   * read the body means "no body".
   */
  private async readRaw(request: Request): Promise<void> {
    try {
      request.body = await readBody(request, this.limits);
    } catch (error) {
      if (error instanceof PayloadTooLargeException || error instanceof BodyAbortedError) throw error;
      request.body = undefined;
    }
  }

  private async readJson(request: Request): Promise<void> {
    const body = await readBody(request, this.limits);
    request.body = body !== undefined && isJson(request) ? parseJsonBody(body, this.limits) : undefined;
  }
}

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  return length !== undefined ? length !== '0' : request.headers['transfer-encoding'] !== undefined;
}

function isJson(request: Request): boolean {
  return request.is(['application/json', 'application/*+json']) !== false;
}
