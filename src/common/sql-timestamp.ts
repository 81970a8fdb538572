/** Formatted in PostgreSQL because a JavaScript Date would drop the microseconds. */
export function isoTimestamp(expression: string): string {
  return `to_char((${expression}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}
