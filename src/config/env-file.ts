import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseEnv } from 'node:util';

type Env = Record<string, string | undefined>;

/** Every name a .env file gave an environment, applied or not: loadConfig holds the file to settings only. */
const fileVariables = new WeakMap<Env, string[]>();

export function envFileVariables(env: Env): readonly string[] {
  return fileVariables.get(env) ?? [];
}

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
  const variables = parseEnv(content);
  fileVariables.set(env, Object.keys(variables));
  for (const [name, value] of Object.entries(variables)) {
    if (value === undefined || Object.hasOwn(env, name)) continue;
    env[name] = value;
    applied.push(name);
  }
  return applied;
}
