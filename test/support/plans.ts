import { Client } from 'pg';

/** A node of `EXPLAIN (ANALYZE, FORMAT JSON)`, as far as the plan tests read it. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/**
 * Nodes of a plan that read more rows of a table in all their loops than `most.read`, or compared more rows in a join
 * filter than `most.compared`: what a plan test holds a statement to, against its request's size.
 */
export function rowsBeyond(node: PlanNode, most: { read: number; compared: number }, found: string[] = []): string[] {
  const loops = Math.max(node['Actual Loops'], 1);
  const read = (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * loops;
  if (node['Relation Name'] !== undefined && read > most.read) {
    found.push(`${node['Node Type']} on ${node['Relation Name']} (${node['Index Name'] ?? 'no index'}): ${read} rows`);
  }
  const compared = (node['Rows Removed by Join Filter'] ?? 0) * loops;
  if (compared > most.compared) found.push(`${node['Node Type']}: ${compared} rows compared`);
  for (const child of node.Plans ?? []) rowsBeyond(child, most, found);
  return found;
}

/** A statement's parameters as a prepared-statement EXECUTE takes them: SQL literals, arrays as array literals. */
export function literalsOf(db: Client, values: readonly unknown[]): string[] {
  type Scalar = string | number | boolean | null;
  const element = (value: Scalar) =>
    value === null ? 'NULL' : `"${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  return (values as Array<Scalar | Scalar[]>).map((value) =>
    value === null
      ? 'NULL'
      : db.escapeLiteral(Array.isArray(value) ? `{${value.map(element).join(',')}}` : String(value)),
  );
}

/**
 * EXPLAIN ANALYZE of `text` prepared as the broker prepares a statement, under `mode` (plan_cache_mode), in a
 * transaction rolled back after it, so the next call runs on the same rows. `setup` runs first in that transaction;
 * `timeout` bounds a regression that would otherwise hang the run.
 */
export async function explainRolledBack(
  db: Client,
  text: string,
  values: readonly unknown[],
  mode: string,
  { setup, timeout = '30s' }: { setup?: string; timeout?: string } = {},
): Promise<PlanNode> {
  await db.query(`SET plan_cache_mode = ${mode}`);
  await db.query('DEALLOCATE ALL');
  await db.query(`PREPARE statement AS ${text}`);
  const literals = literalsOf(db, values);
  await db.query('BEGIN');
  try {
    await db.query(`SET LOCAL statement_timeout = '${timeout}'`);
    if (setup) await db.query(setup);
    const { rows } = await db.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE statement(${literals.join(', ')})`,
    );
    return rows[0]['QUERY PLAN'][0].Plan;
  } finally {
    await db.query('ROLLBACK');
  }
}
