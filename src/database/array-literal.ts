/**
 * A PostgreSQL array literal for a statement's array parameter. node-postgres
 * escapes every element with two regular expressions; ids and numbers never
 * need escaping and other text seldom does, which on a push of a thousand
 * items is most of the cost of sending its parameters.
 */
export function arrayLiteral(values: ReadonlyArray<string | number | null>): string {
  let literal = '{';
  for (let index = 0; index < values.length; index += 1) {
    if (index > 0) literal += ',';
    const value = values[index];
    literal += value === null ? 'NULL' : typeof value === 'number' ? String(value) : quoted(value);
  }
  return `${literal}}`;
}

function quoted(text: string): string {
  return text.includes('\\') || text.includes('"') ? `"${text.replace(/[\\"]/g, '\\$&')}"` : `"${text}"`;
}
