import type { NextFunction, Request, Response } from 'express';

/** The pages for people: the web console and Swagger UI with its OpenAPI document. */
export const CONSOLE_PATH = '/console';
export const DOCS_PATH = '/docs';
export const DOCS_JSON_PATH = '/docs-json';
export const DOCS_YAML_PATH = '/docs-yaml';

const PAGE_PREFIXES = [CONSOLE_PATH, DOCS_PATH];
const PAGE_PATHS = new Set([DOCS_JSON_PATH, DOCS_YAML_PATH]);

/** Reading a page changes nothing, and its headers keep other sites from framing it. */
export function isPageRead(request: Request): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = request.path;
  return PAGE_PATHS.has(path) || PAGE_PREFIXES.some((prefix) => path === prefix || path.startsWith(`${prefix}/`));
}

const FRAME_AND_SNIFF_HEADERS: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** The console calls the API like any client, so it needs no route of its own and reaches nothing a token could not. */
export const CONSOLE_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  ...FRAME_AND_SNIFF_HEADERS,
};

/**
 * Swagger UI's page carries two inline <style> blocks and a style attribute of @nestjs/swagger's template, hence
 * 'unsafe-inline' for styles only; its scripts are files of its own, and "Try it out" calls this origin.
 */
export const DOCS_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  ...FRAME_AND_SNIFF_HEADERS,
};

export function withHeaders(headers: Record<string, string>) {
  return (_request: Request, response: Response, next: NextFunction): void => {
    for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
    next();
  };
}
