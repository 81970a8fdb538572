import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Response } from 'express';

/** A parked long poll stops waiting instead of claiming messages under a lease nobody will ever see. */
export const ClientAbortSignal = createParamDecorator((_data: unknown, context: ExecutionContext): AbortSignal => {
  const response = context.switchToHttp().getResponse<Response>();
  const controller = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) controller.abort();
  });
  return controller.signal;
});
