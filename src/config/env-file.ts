import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';

type Env = Record<string, string | undefined>;

/** The real environment wins: a variable already set, even to an empty string, keeps its value. */
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
