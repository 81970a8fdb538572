import { CallHandler, ExecutionContext, HttpStatus, Injectable, NestInterceptor } from '@nestjs/common';
import type { Response } from 'express';
import { map, Observable } from 'rxjs';

/**
 * Answers a bare 204 when the handler has nothing to return (a pop with no
 * messages), so controllers stay free of @Res().
 */
@Injectable()
export class NoContentWhenEmptyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((body: unknown) => {
        if (body === undefined || body === null) {
          context.switchToHttp().getResponse<Response>().status(HttpStatus.NO_CONTENT);
        }
        return body;
      }),
    );
  }
}
