import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';

type Env = Record<string, string | undefined>;

/**
 * Copies the variables of a `.env` file (by default the one in the working
 * directory) into the environment. Every entry point calls it before
 * loadConfig: the broker, the migration CLI's data source, `npm run token`.
 * A variable already set, even to an empty string, keeps its value: the real
 * environment wins over the file. A missing file is not an error. Returns
 * the names taken from the file.
 */
export function loadEnvFile(path: string = resolve('.env'), env: Env = process.env): string[] {
  let content: string;
  try {
    content = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const applied: string[] = [];
  for (const [name, value] of Object.entries(parseEnv(content))) {
    if (value === undefined || Object.hasOwn(env, name)) continue;
    env[name] = value;
    applied.push(name);
  }
  return applied;
}
