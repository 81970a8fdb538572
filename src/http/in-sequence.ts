import type { NextFunction, Request, RequestHandler, Response } from 'express';

/** Express's rules: an error, thrown or rejected, or the last one's next() leaves to `next`. */
export function inSequence(handlers: readonly RequestHandler[]): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    let index = 0;
    const step = (error?: unknown): void => {
      if (error !== undefined && error !== null) return next(error);
      const handler = handlers[index++];
      if (!handler) return next();
      try {
        const result: unknown = handler(request, response, step);
        if (result instanceof Promise) result.catch(next);
      } catch (thrown) {
        next(thrown);
      }
    };
    step();
  };
}
