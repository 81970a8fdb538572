import { basename, join } from 'node:path';

const twoUp = join(__dirname, '..', '..');
/** The repository, whether this file runs compiled (dist/src/console) or from source under jest. */
export const REPO_ROOT = basename(twoUp) === 'dist' ? join(twoUp, '..') : twoUp;
export const CONSOLE_SOURCE_DIR = join(REPO_ROOT, 'console');
export const CONSOLE_DIR = join(REPO_ROOT, 'dist', 'console');
