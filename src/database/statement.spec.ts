import { NO_SQL, nothing, numbered, prepared, raw, rows, shared, sql, statement } from './statement';

describe('sql', () => {
  it('numbers each value as a parameter, in order', () => {
    expect(numbered(sql`SELECT * FROM t WHERE a = ${'x'} AND b = ANY(${[1, 2]}::int[]) AND c = ${null}`)).toEqual({
      text: 'SELECT * FROM t WHERE a = $1 AND b = ANY($2::int[]) AND c = $3',
      values: ['x', [1, 2], null],
    });
  });

  it('gives a shared value one number wherever it is written, nested pieces included', () => {
    const tenant = shared('t1');
    const piece = sql`SELECT id FROM p WHERE tenant_id = ${tenant} AND n = ${7}`;
    expect(numbered(sql`WITH p AS (${piece}) SELECT * FROM q WHERE tenant_id = ${tenant} AND x = ${8}`)).toEqual({
      text: 'WITH p AS (SELECT id FROM p WHERE tenant_id = $1 AND n = $2) SELECT * FROM q WHERE tenant_id = $1 AND x = $3',
      values: ['t1', 7, 8],
    });
  });

  it('numbers two equal values apart unless shared: a parameter has one type', () => {
    expect(numbered(sql`${null}::uuid IS NULL AND ${null}::int IS NULL`).text).toBe(
      '$1::uuid IS NULL AND $2::int IS NULL',
    );
  });

  it('writes raw text as it is and never a string value', () => {
    const query = sql`SELECT ${raw('a, b')} FROM t WHERE c = ${"'; DROP TABLE t; --"}${NO_SQL}`;
    expect(numbered(query)).toEqual({ text: 'SELECT a, b FROM t WHERE c = $1', values: ["'; DROP TABLE t; --"] });
  });

  it('numbers the same piece afresh in every statement it goes into', () => {
    const tenant = shared('t1');
    const piece = sql`tenant_id = ${tenant}`;
    expect(numbered(sql`SELECT ${1}, ${piece}`).text).toBe('SELECT $1, tenant_id = $2');
    expect(numbered(sql`SELECT ${piece}`).text).toBe('SELECT tenant_id = $1');
  });
});

describe('statements', () => {
  it('carry the parser of their rows, and a name when prepared', () => {
    const named = prepared('leasehold_test', sql`SELECT n FROM t WHERE id = ${5}`, (found: Array<{ n: string }>) =>
      found.map((row) => Number(row.n)),
    );
    expect(named).toMatchObject({ name: 'leasehold_test', text: 'SELECT n FROM t WHERE id = $1', values: [5] });
    expect(named.parse([{ n: '3' }, { n: '4' }])).toEqual([3, 4]);

    const unnamed = statement(sql`SELECT 1`, rows);
    expect(unnamed.name).toBeUndefined();
    expect(unnamed.parse([{ one: 1 }])).toEqual([{ one: 1 }]);
    expect(statement(sql`SELECT 1`, nothing).parse([{}])).toBeUndefined();
  });
});
