import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import type { Response } from 'express';
import { CONSOLE_HEADERS, CONSOLE_PATH } from '../http/pages';
import { CONSOLE_DIR } from './console-paths';

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
      for (const [name, value] of Object.entries(CONSOLE_HEADERS)) response.setHeader(name, value);
      // Hashed file names change with their content; index.html must be asked for again to find the new ones.
      response.setHeader(
        'Cache-Control',
        path.includes(`${join('console', 'assets')}`) ? 'public, max-age=31536000, immutable' : 'no-cache',
      );
    },
  });
}
