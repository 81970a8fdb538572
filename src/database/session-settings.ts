import type { ClientBase } from 'pg';

/**
 * The first statement of every session the broker opens. JIT off: the planner estimates a tenant's statement from
 * statistics of whole tables, the largest tenant's rows included, so a statement that touches a few rows crosses
 * jit_above_cost and compiles for hundreds of milliseconds. A SET, not the `options` startup parameter: PgBouncer
 * refuses startup parameters it does not track, or drops them when told to ignore them (docs/deployment.md).
 */
export const SESSION_SETTINGS = 'SET jit = off';

/** For connections outside the pool (LISTEN, probe, migration lock, the start-up check); the pool runs it on connect. */
export async function connectSession(client: ClientBase): Promise<void> {
  await client.connect();
  await client.query(SESSION_SETTINGS);
}
