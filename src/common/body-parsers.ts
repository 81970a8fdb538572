import express, { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response } from 'express';
import { LEASE_EXTEND_URL } from './lease-extend-url';

/**
 * Every request body, in one middleware so the hot lease route pays for one
 * router layer instead of one per parser:
 *
 * - The lease route gets the raw bytes: its lenient pipe, not Express, decides
 *   what a malformed body means (60 seconds, never a 400). Only an oversized
 *   body is an error there; any other decoding failure means "no body".
 * - Every other route parses JSON. Any other body is read only to hold it to
 *   the same limit, then dropped: an oversized body is a 413 whatever its type.
 * - Parser failures answer in the contract's `{"error"}` shape.
 */
export function bodyParsers(limit: number): RequestHandler {
  const raw = express.raw({ type: () => true, limit });
  const json = express.json({ limit, type: ['application/json', 'application/*+json'] });
  // Reads whatever the JSON parser left unread (other content types), only to enforce the limit.
  const unparsed = new WeakSet<Request>();
  const limitOnly = express.raw({ type: () => true, limit, verify: (request) => unparsed.add(request as Request) });

  return (request, response, next) => {
    if (LEASE_EXTEND_URL.test(request.url)) {
      raw(request, response, (error?: unknown) => {
        if (error && (error as { type?: string }).type === 'entity.too.large') {
          bodyParserErrors(error, request, response, next);
          return;
        }
        if (error) request.body = undefined;
        next();
      });
      return;
    }
    json(request, response, (error?: unknown) => {
      if (error) {
        bodyParserErrors(error, request, response, next);
        return;
      }
      limitOnly(request, response, (rawError?: unknown) => {
        if (rawError) {
          bodyParserErrors(rawError, request, response, next);
          return;
        }
        if (unparsed.has(request)) request.body = undefined;
        next();
      });
    });
  };
}

const bodyParserErrors: ErrorRequestHandler = (error, _request: Request, response: Response, next: NextFunction) => {
  const { type, status } = error as { type?: string; status?: number };
  if (type === 'entity.too.large') {
    response.status(413).json({ error: 'payload too large' });
  } else if (type === 'entity.parse.failed') {
    response.status(400).json({ error: 'invalid JSON body' });
  } else if (typeof status === 'number' && status >= 400 && status < 500) {
    response.status(status).json({ error: (error as Error).message });
  } else {
    next(error);
  }
};
