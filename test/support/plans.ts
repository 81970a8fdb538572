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

/** A statement's parameters as a prepared-statement EXECUTE takes them: SQL literals, arrays as array literals. */
export function literalsOf(db: Client, values: readonly unknown[]): string[] {
  return (values as Array<string | number | boolean | null | Array<string | number | boolean>>).map((value) =>
    value === null ? 'NULL' : db.escapeLiteral(Array.isArray(value) ? `{${value.join(',')}}` : String(value)),
  );
}
