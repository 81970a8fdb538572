import { Client } from 'pg';
import { DatabaseConfig } from '../config/app-config';
import { connectSession } from './session-settings';

/** Refusals no retry can mend: a wrong password, a missing database or role, no permission to connect. */
const PERMANENT_CODES = new Set(['28P01', '28000', '3D000', '42501', '3F000']);
const RETRY_EVERY_MS = 500;

/** Without credentials: for log lines. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}${parsed.pathname || '/'}`;
  } catch {
    return 'DATABASE_URL';
  }
}

/** Retries a database still starting alongside the broker; a refusal waiting cannot mend is answered at once. */
export async function databaseProblem(database: DatabaseConfig, url: string): Promise<string | undefined> {
  const deadline = performance.now() + database.connectTimeoutMs;
  for (;;) {
    const remaining = deadline - performance.now();
    const client = new Client({
      connectionString: url,
      connectionTimeoutMillis: Math.max(1, Math.round(remaining)),
      query_timeout: Math.max(1, Math.round(remaining)),
      application_name: 'leasehold-start',
    });
    client.on('error', () => undefined);
    try {
      await connectSession(client);
      return undefined;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const cause = describeError(error);
      if ((typeof code === 'string' && PERMANENT_CODES.has(code)) || performance.now() + RETRY_EVERY_MS >= deadline) {
        return `cannot use the database at ${describeUrl(url)}: ${cause}`;
      }
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_EVERY_MS));
  }
}

function describeError(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' && message !== '' ? message : String(error);
  return typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text;
}
