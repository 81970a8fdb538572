/** node-postgres escapes each element with two regexes; ids and numbers never need it, so this is usually one join. */
export function arrayLiteral(values: ReadonlyArray<string | number | null>): string {
  if (values.length === 0) return '{}';
  if (values.every((value) => typeof value === 'number')) return `{${values.join(',')}}`;
  if (values.every((value) => typeof value === 'string' && !needsEscape(value))) return `{"${values.join('","')}"}`;
  return `{${values.map((value) => (value === null ? 'NULL' : typeof value === 'number' ? String(value) : quoted(value))).join(',')}}`;
}

function needsEscape(text: string): boolean {
  return text.includes('\\') || text.includes('"');
}

function quoted(text: string): string {
  return needsEscape(text) ? `"${text.replace(/[\\"]/g, '\\$&')}"` : `"${text}"`;
}
