import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The V8 flags `npm start` gives the broker of the checkout at `root`, so a benchmark runs the process operators run. */
export function startFlags(root: string): string[] {
  const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts as Record<string, string>;
  return scripts.start.split(/\s+/).filter((word) => word.startsWith('--'));
}
