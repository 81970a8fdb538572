import { Client, PoolClient, QueryConfig, QueryResult, types } from 'pg';
import { queryNamed, queryPipelined, queryTogether } from '../src/database/pipelined-query';
import { countMessages, openSession } from './support/pg-session';
import { onEmbeddedDatabase } from './support/test-app';

/** What a caller reads of a result. */
const answer = ({ command, rowCount, rows, fields }: QueryResult) => ({
  command,
  rowCount,
  rows,
  fields: fields.map(({ name, dataTypeID }) => ({ name, dataTypeID })),
});

const TYPED: QueryConfig = {
  name: 'described_typed',
  text:
    "SELECT $1::int AS n, $1::bigint AS big, '2026-12-07T05:00:00Z'::timestamptz AS at, " +
    `'{"a":[1,2]}'::jsonb AS doc, NULL::text AS nothing, ARRAY['x','y']::text[] AS list`,
  values: [7],
};
const SERIES: QueryConfig = {
  name: 'described_series',
  text: 'SELECT g, g * 2 AS twice FROM generate_series(1, $1::int) AS g',
  values: [3],
};
const INSERT: QueryConfig = {
  name: 'described_insert',
  text: 'INSERT INTO described_rows (n) VALUES ($1)',
  values: [1],
};

// The named statements of the PostgreSQL path; the embedded database runs every statement unnamed.
(onEmbeddedDatabase ? describe.skip : describe)('a named statement is described once per connection', () => {
  let client: Client;

  beforeEach(async () => {
    client = await openSession();
    await client.query('CREATE TEMP TABLE described_rows (n int)');
  });

  afterEach(async () => {
    await client.end();
  });

  const on = (): PoolClient => client as unknown as PoolClient;

  it('answers the same rows, types parsed, without a RowDescription after the first execution', async () => {
    const descriptions = countMessages(client, 'rowDescription');
    const first = answer(await queryNamed(on(), TYPED));
    expect(descriptions.count).toBe(1);
    expect(first.rows).toEqual([
      { n: 7, big: '7', at: new Date('2026-12-07T05:00:00Z'), doc: { a: [1, 2] }, nothing: null, list: ['x', 'y'] },
    ]);

    for (let run = 0; run < 3; run += 1) expect(answer(await queryNamed(on(), TYPED))).toEqual(first);
    expect(descriptions.count).toBe(1);
    descriptions.stop();
  });

  it('keeps each statement of a round trip to its own result, around BEGIN, without rows and before COMMIT', async () => {
    const roundTrip = async () => [
      ...(await queryTogether(on(), [SERIES, TYPED])).map(answer),
      answer(await queryPipelined(on(), INSERT, ['BEGIN'], [{ ...INSERT, name: undefined, values: [2] }, 'COMMIT'])),
      answer(await queryNamed(on(), INSERT)),
      answer(await queryPipelined(on(), SERIES, ['BEGIN'], ['COMMIT'])),
    ];
    // The first pass parses them, each in its own round trip's messages.
    await roundTrip();
    const descriptions = countMessages(client, 'rowDescription');
    const described = await roundTrip();
    expect(descriptions.count).toBe(0);

    expect(described).toEqual(await roundTrip());
    expect(described.map(({ command, rowCount }) => [command, rowCount])).toEqual([
      ['SELECT', 3],
      ['SELECT', 1],
      ['INSERT', 1],
      ['INSERT', 1],
      ['SELECT', 3],
    ]);
    expect(described[0].rows).toEqual([
      { g: 1, twice: 2 },
      { g: 2, twice: 4 },
      { g: 3, twice: 6 },
    ]);
    expect(described[2].fields).toEqual([]);
    expect((await client.query('SELECT count(*)::int AS n FROM described_rows')).rows).toEqual([{ n: 9 }]);
    descriptions.stop();
  });

  it('parses statements new to the connection in the round trip that first runs them, each under its own name', async () => {
    const parsed = () => (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection;
    const trips = countMessages(client, 'readyForQuery');
    const first = (await queryTogether(on(), [SERIES, TYPED, INSERT])).map(answer);
    expect(trips.count).toBe(1);
    expect(Object.keys(parsed().parsedStatements).sort()).toEqual([INSERT.name, SERIES.name, TYPED.name].sort());

    expect((await queryTogether(on(), [SERIES, TYPED, INSERT])).map(answer)).toEqual(first);
    expect(trips.count).toBe(2);
    trips.stop();
  });

  it('parses a new statement again after its parse failed in a round trip with others', async () => {
    const missing: QueryConfig = {
      name: 'described_later',
      text: 'SELECT count(*)::int AS n FROM pg_temp.described_later WHERE $1::int = 1',
      values: [1],
    };
    await expect(queryTogether(on(), [SERIES, missing, TYPED])).rejects.toThrow('does not exist');
    const connection = (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection;
    // The statement before the failure was parsed; the failed one and the one skipped after it were not.
    expect(connection.parsedStatements[SERIES.name!]).toBe(SERIES.text);
    expect(connection.parsedStatements[missing.name!]).toBeUndefined();
    expect(connection.parsedStatements[TYPED.name!]).toBeUndefined();

    await client.query('CREATE TEMP TABLE described_later (n int)');
    const [series, later, typed] = await queryTogether(on(), [SERIES, missing, TYPED]);
    expect([series.rowCount, later.rows, typed.rowCount]).toEqual([3, [{ n: 0 }], 1]);
  });

  it('parses a first statement again whose parse failed behind BEGIN, which pg had taken for parsed', async () => {
    const missing: QueryConfig = {
      name: 'described_first_later',
      text: 'SELECT count(*)::int AS n FROM pg_temp.described_first_later WHERE $1::int = 1',
      values: [1],
    };
    await expect(queryPipelined(on(), missing, ['BEGIN'], ['COMMIT'])).rejects.toThrow('does not exist');
    await client.query('ROLLBACK');

    await client.query('CREATE TEMP TABLE described_first_later (n int)');
    expect((await queryPipelined(on(), missing, ['BEGIN'], ['COMMIT'])).rows).toEqual([{ n: 0 }]);
  });

  it('writes a round trip to the socket once, whatever it holds', async () => {
    const stream = (client as unknown as { connection: { stream: { write: (...args: unknown[]) => boolean } } })
      .connection.stream;
    const write = stream.write;
    let writes = 0;
    stream.write = (...args: unknown[]) => {
      writes += 1;
      return write.apply(stream, args);
    };
    try {
      const results = await queryTogether(on(), [TYPED, SERIES, INSERT]);
      expect(writes).toBe(1);
      expect(results.map((result) => result.rowCount)).toEqual([1, 3, 1]);

      writes = 0;
      await queryPipelined(on(), SERIES, ['BEGIN'], [{ text: 'INSERT INTO described_rows (n) VALUES (2)' }, 'COMMIT']);
      expect(writes).toBe(1);
    } finally {
      stream.write = write;
    }
    expect((await client.query('SELECT n FROM described_rows ORDER BY n')).rows).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('refuses a value it cannot send, parsing nothing half, and the connection answers the next statement', async () => {
    const unsendable = {
      toPostgres: () => {
        throw new Error('cannot be sent');
      },
    };
    const broken: QueryConfig = { name: 'described_unsendable', text: 'SELECT $1::text AS t', values: [unsendable] };
    await expect(queryNamed(on(), broken)).rejects.toThrow('cannot be sent');
    expect((await queryNamed(on(), { ...broken, values: ['sent'] })).rows).toEqual([{ t: 'sent' }]);
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);

    // Behind BEGIN, whose ParseComplete pg also takes for the statement's: the transaction is open and rolls back.
    const behind: QueryConfig = { ...broken, name: 'described_unsendable_behind' };
    await expect(queryPipelined(on(), behind, ['BEGIN'], [])).rejects.toThrow('cannot be sent');
    await client.query('ROLLBACK');
    expect((await queryPipelined(on(), { ...behind, values: ['again'] }, ['BEGIN'], ['COMMIT'])).rows).toEqual([
      { t: 'again' },
    ]);

    // In a later statement of the round trip: none of its statements is sent, and both run next time.
    const together: QueryConfig = { ...broken, name: 'described_unsendable_together' };
    await expect(queryTogether(on(), [SERIES, together])).rejects.toThrow('cannot be sent');
    const [series, sent] = await queryTogether(on(), [SERIES, { ...together, values: ['together'] }]);
    expect(series.rowCount).toBe(3);
    expect(sent.rows).toEqual([{ t: 'together' }]);
  });

  it('answers right after a failed execution, and describes a statement with types of its own every time', async () => {
    const divide: QueryConfig = { name: 'described_divide', text: 'SELECT 10 / $1::int AS q', values: [2] };
    expect((await queryNamed(on(), divide)).rows).toEqual([{ q: 5 }]);
    await expect(queryNamed(on(), { ...divide, values: [0] })).rejects.toThrow('division by zero');
    expect((await queryNamed(on(), { ...divide, values: [5] })).rows).toEqual([{ q: 2 }]);

    const descriptions = countMessages(client, 'rowDescription');
    const asText = { getTypeParser: () => (value: string) => `text:${value}` } as unknown as typeof types;
    const typed = { name: 'described_own_types', text: 'SELECT $1::int AS n', values: [3], types: asText };
    expect((await queryNamed(on(), typed)).rows).toEqual([{ n: 'text:3' }]);
    expect((await queryNamed(on(), typed)).rows).toEqual([{ n: 'text:3' }]);
    expect(descriptions.count).toBe(2);
    descriptions.stop();
  });
});
