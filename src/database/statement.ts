/**
 * What a repository hands out for every query: the SQL, its parameters, and how its rows become the answer, so a caller
 * runs it (UnitOfWork) without knowing its rows. Named: prepared once per connection (unnamed on the embedded database).
 */
export interface Statement<T> {
  readonly name?: string;
  readonly text: string;
  readonly values: unknown[];
  parse(rows: any[]): T;
}

/** A value written more than once in a statement: each `${it}` is the same parameter. */
export class Shared<T = unknown> {
  constructor(readonly value: T) {}
}

export function shared<T>(value: T): Shared<T> {
  return new Shared(value);
}

/** SQL text written in as it is (a column list, a CTE from a helper), never a parameter: only code may build one. */
export class RawSql {
  constructor(readonly text: string) {}
}

export function raw(text: string): RawSql {
  return new RawSql(text);
}

/** A piece of SQL whose parameters are numbered when it becomes a statement, so pieces compose. */
export class Sql {
  constructor(
    readonly strings: readonly string[],
    readonly parts: readonly unknown[],
  ) {}
}

/**
 * Every `${value}` is a parameter ($1, $2, ... in order), but a Shared one keeps its first number, a nested sql`` is
 * written in place and raw() as text.
 */
export function sql(strings: TemplateStringsArray, ...parts: unknown[]): Sql {
  return new Sql(strings, parts);
}

export const NO_SQL = raw('');

/**
 * A key as an InitPlan: a custom plan then estimates its rows as a generic plan does (from the number of distinct
 * keys), not from statistics of this one. A small queue beside a large one looked cheaper to a custom plan than to the
 * generic one, and PostgreSQL planned its claim at every pop (test/pop-ack-plans).
 */
export function planAsAny(key: Shared, type: 'uuid' | 'text'): Sql {
  return sql`(SELECT ${key}::${raw(type)})`;
}

/**
 * The tenant as an InitPlan (planAsAny). A tenant ANALYZE never saw looks empty, and the planner then bounded each
 * lookup by id with the tenant alone, through another index of the table: a push or an ack of 10,000 items read every
 * partition of the tenant for each one and ran into the statement timeout (test/push-plans-wide).
 */
export function planAsAnyTenant(tenant: Shared<string>): Sql {
  return planAsAny(tenant, 'uuid');
}

/**
 * An array parameter whose length the planner cannot see (an InitPlan): a custom plan then costs what the generic one
 * does, and PostgreSQL keeps the generic plan instead of planning at every call, as it did when a one-key custom plan
 * looked ten times cheaper. At any size only where each element drives a lookup of its own (a LATERAL): joined to
 * another set of the request's rows, an array thought to hold ten can be nested-looped against itself (requestArrays
 * bounds that by the request's size). test/pop-ack-plans holds which statements keep a generic plan.
 */
export function unsized(values: unknown, type: ArrayType): Sql {
  // Cast again: as `= ANY ((SELECT ...))` it would be a sublink comparing to each row, not to the array's elements.
  return sql`(SELECT ${values}::${raw(type)})::${raw(type)}`;
}

export type ArrayType = 'uuid[]' | 'text[]' | 'bigint[]' | 'int[]' | 'boolean[]';

/** The most rows a request's arrays may hold and still reach the planner unsized in requestArrays. */
export const UNSIZED_ROWS = 100;

/**
 * The arrays of a statement that joins a request's rows to one another. Up to UNSIZED_ROWS rows they are unsized, and
 * PostgreSQL keeps one generic plan: with their length in sight, a push or an ack of a few messages was planned at
 * every call, 0.25-1 ms on a database of some size, more than it took to run. A plan made for ten rows compares at
 * most a hundred with a hundred. Larger requests show their length and are planned for it (hidden, a 10,000-item push
 * was nested-looped against itself); `name` then names that statement apart.
 */
export function requestArrays(
  rows: number,
  name: string,
): { array: (values: unknown, type: ArrayType) => Sql; name: string } {
  return rows <= UNSIZED_ROWS
    ? { array: unsized, name }
    : { array: (values, type) => sql`${values}::${raw(type)}`, name: `${name}_sized` };
}

export function numbered(query: Sql): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const numbers = new Map<Shared, string>();
  const write = ({ strings, parts }: Sql): string => {
    let text = strings[0];
    for (let index = 0; index < parts.length; index += 1) {
      const part = parts[index];
      if (part instanceof RawSql) text += part.text;
      else if (part instanceof Sql) text += write(part);
      else if (part instanceof Shared) {
        let number = numbers.get(part);
        if (number === undefined) {
          number = `$${values.push(part.value)}`;
          numbers.set(part, number);
        }
        text += number;
      } else text += `$${values.push(part)}`;
      text += strings[index + 1];
    }
    return text;
  };
  const text = write(query);
  return { text, values };
}

/** Parsed by `parse`; prepared under `name` per connection. */
export function prepared<T, R = any>(name: string, query: Sql, parse: (rows: R[]) => T): Statement<T> {
  const { text, values } = numbered(query);
  return { name, text, values, parse };
}

/** Sent unnamed: parsed by PostgreSQL every time, for statements too rare or too varied to keep prepared. */
export function statement<T, R = any>(query: Sql, parse: (rows: R[]) => T): Statement<T> {
  const { text, values } = numbered(query);
  return { text, values, parse };
}

/** For a statement whose rows are its answer as they come. */
export function rows<R>(rows: R[]): R[] {
  return rows;
}

/** For a statement run for what it does: its rows are not read. */
export function nothing(): void {}
