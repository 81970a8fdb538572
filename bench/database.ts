import { Client } from 'pg';

/** A database of the benchmark's, gone with whatever connects to it. */
export async function dropDatabase(adminUrl: string, database: string): Promise<void> {
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
}

/** A database of the benchmark's, empty. */
export async function recreateDatabase(adminUrl: string, database: string): Promise<void> {
  await dropDatabase(adminUrl, database);
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
}

/** What autovacuum would have done by now on a server; it is off on the benchmark machine. */
export async function vacuumAnalyze(databaseUrl: string): Promise<void> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('VACUUM ANALYZE');
  await db.end();
}
