import { Client } from 'pg';

/** Where the benchmarks create and drop their databases. */
export const ADMIN_URL = process.env.BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The URL of `database` on the server `adminUrl` names. */
export function databaseUrlOf(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A database of the benchmark's, gone with whatever connects to it. */
export async function dropDatabase(adminUrl: string, database: string): Promise<void> {
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** A database of the benchmark's, empty; its URL. */
export async function recreateDatabase(adminUrl: string, database: string): Promise<string> {
  await dropDatabase(adminUrl, database);
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
  return databaseUrlOf(adminUrl, database);
}

/** What autovacuum would have done by now on a server; it is off on the benchmark machine. */
export async function vacuumAnalyze(databaseUrl: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('VACUUM ANALYZE');
  await db.end();
}
