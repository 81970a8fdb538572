import { Client } from 'pg';

/** What autovacuum would have done by now on a server; it is off on the benchmark machine. */
export async function vacuumAnalyze(databaseUrl: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('VACUUM ANALYZE');
  await db.end();
}
