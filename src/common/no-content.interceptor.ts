import { CallHandler, ExecutionContext, HttpStatus, Injectable, NestInterceptor } from '@nestjs/common';
import type { Response } from 'express';
import { map, mergeMap, Observable } from 'rxjs';
import { JsonText } from './json-text';
import { whenAnswered } from './later-answer';

/** Keeps controllers free of @Res(); on the router's path, also waits for a LaterAnswer. */
@Injectable()
export class NoContentWhenEmptyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      mergeMap((body: unknown) => whenAnswered(body)),
      map((body: unknown) => {
        const response = context.switchToHttp().getResponse<Response>();
        if (body === undefined || body === null) {
          response.status(HttpStatus.NO_CONTENT);
        }
        if (body instanceof JsonText) {
          response.setHeader('Content-Type', 'application/json; charset=utf-8');
          return body.text;
        }
        return body;
      }),
    );
  }
}
