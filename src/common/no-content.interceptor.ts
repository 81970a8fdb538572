import { CallHandler, ExecutionContext, HttpStatus, Injectable, NestInterceptor } from '@nestjs/common';
import type { Response } from 'express';
import { map, Observable } from 'rxjs';
import { JsonText } from './json-text';

/** Keeps controllers free of @Res(). */
@Injectable()
export class NoContentWhenEmptyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
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
