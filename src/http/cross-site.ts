import type { IncomingHttpHeaders } from 'node:http';
import cors from 'cors';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { RENEW_AFTER_HEADER, DEADLINE_AFTER_HEADER, LEASE_STATUS_HEADER } from '../lease/renewal-hints';
import { isPageRead } from './pages';

export const CROSS_SITE_ERROR = 'cross-site request refused';

/** What an allowed origin's scripts may read of an answer besides the CORS-safelisted headers. */
const EXPOSED_HEADERS = [
  'x-request-id',
  'Retry-After',
  'X-Next-After',
  'WWW-Authenticate',
  RENEW_AFTER_HEADER,
  DEADLINE_AFTER_HEADER,
  LEASE_STATUS_HEADER,
];
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * Whether a browser sent this on behalf of a page of another site (or a sibling subdomain), which with auth off or a
 * cookie-authenticating gateway would act with the visitor's reach. The rules of Go's http.CrossOriginProtection,
 * less its exemption of GET, since a pop is a GET that consumes: a trusted Origin passes; otherwise the browser's
 * Sec-Fetch-Site decides; without it an Origin (or else a Referer) must name the Host it was sent to. A request with
 * none of these did not come from a browser page of another site (curl, SDKs, probes), or from a browser too old to say.
 */
export function refusedAsCrossSite(headers: IncomingHttpHeaders, allowedOrigins: ReadonlySet<string>): boolean {
  const origin = headers.origin;
  if (origin !== undefined && allowedOrigins.has(origin)) return false;
  const site = headers['sec-fetch-site'];
  if (site !== undefined) return site !== 'same-origin' && site !== 'none';
  if (origin !== undefined) return !onHost(origin, headers.host);
  const referer = headers.referer;
  if (referer === undefined) return false;
  const refererOrigin = originOf(referer);
  if (refererOrigin !== undefined && allowedOrigins.has(refererOrigin)) return false;
  return !onHost(referer, headers.host);
}

/**
 * Refuses cross-site requests before anything else reads them (no body, no token, no database), and gives the
 * allow-listed origins CORS answers, preflights included, through the `cors` package that Nest's enableCors uses.
 */
export function crossSiteCheck(allowedOrigins: readonly string[]): RequestHandler {
  const allowed = new Set(allowedOrigins);
  const corsAnswer = cors({
    origin: [...allowed],
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
  return (request: Request, response: Response, next: NextFunction): void => {
    const { headers } = request;
    if (refusedAsCrossSite(headers, allowed)) {
      if (isPageRead(request)) return next();
      // Refused unread: close rather than read and discard a body still arriving.
      if (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) {
        response.setHeader('Connection', 'close');
      }
      response.status(403).json({ error: CROSS_SITE_ERROR });
      return;
    }
    if (headers.origin !== undefined && allowed.has(headers.origin)) return corsAnswer(request, response, next);
    next();
  };
}

function originOf(url: string): string | undefined {
  try {
    const { origin } = new URL(url);
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** `null` (an opaque origin: sandboxed frames, data: and file: pages) and anything unparseable match no host. */
function onHost(url: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const { host: urlHost } = new URL(url);
    return urlHost !== '' && urlHost === host.toLowerCase();
  } catch {
    return false;
  }
}
