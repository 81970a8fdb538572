import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import type { Response } from 'express';
import { CONSOLE_DIR } from './console-paths';

export const CONSOLE_PATH = '/console';

/** The console calls the API like any client, so it needs no route of its own and reaches nothing a token could not. */
const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** Mounted on /console only: Express never runs it for the API's paths, the lease route's included. */
export function serveConsole(app: NestExpressApplication): void {
  if (!existsSync(join(CONSOLE_DIR, 'index.html'))) {
    new Logger('Console').warn(`The console is not built (${CONSOLE_DIR}); run npm run build:console`);
    return;
  }
  app.useStaticAssets(CONSOLE_DIR, {
    prefix: CONSOLE_PATH,
    index: 'index.html',
    redirect: true,
    dotfiles: 'ignore',
    etag: true,
    setHeaders: (response: Response, path: string) => {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.setHeader(name, value);
      // Hashed file names change with their content; index.html must be asked for again to find the new ones.
      response.setHeader(
        'Cache-Control',
        path.includes(`${join('console', 'assets')}`) ? 'public, max-age=31536000, immutable' : 'no-cache',
      );
    },
  });
}
