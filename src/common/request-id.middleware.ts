import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const REQUEST_ID = Symbol('requestId');
const HEADER = 'x-request-id';

type WithRequestId = Request & { [REQUEST_ID]?: string };

/** Tags each request so a logged failure can be matched to what the caller saw. */
export function requestIdMiddleware(request: Request, response: Response, next: NextFunction): void {
  const incoming = request.headers[HEADER];
  const id = typeof incoming === 'string' && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
  (request as WithRequestId)[REQUEST_ID] = id;
  response.setHeader(HEADER, id);
  next();
}

export function requestIdOf(request: Request): string {
  return (request as WithRequestId)[REQUEST_ID] ?? '-';
}
