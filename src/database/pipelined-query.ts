import pg, { FieldDef, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { serialize } from 'pg-protocol';

interface Connection {
  stream: { writable: boolean; write(chunk: Buffer): boolean };
  on(event: 'parseComplete', listener: () => void): void;
  removeListener(event: 'parseComplete', listener: () => void): void;
  /** pg's record of the named statements parsed on this connection, and of those whose parse is on its way. */
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
}

/** pg's Result, with the parts its published types leave out. */
interface Result {
  command: string | null;
  fields: FieldDef[];
  _parsers: unknown[] | undefined;
  _prebuiltEmptyResultObject: object | null;
}

/** pg's own conversion of parameters, which its published types leave out. */
const prepareValue = (pg as unknown as { utils: { prepareValue: (value: unknown) => unknown } }).utils.prepareValue;

const DESCRIBE_PORTAL = serialize.describe({ type: 'P', name: '' });
const EXECUTE_PORTAL = serialize.execute({ portal: '' });
const SYNC = serialize.sync();

/**
 * A round trip's protocol messages, written to the socket as one buffer: pg writes each message on its own, and the
 * socket's queue of them, and its writev, cost more than a copy into one buffer.
 */
class Wire {
  private readonly messages: Buffer[] = [];

  /** How many messages it holds, for `truncate`. */
  get size(): number {
    return this.messages.length;
  }

  truncate(size: number): void {
    this.messages.length = size;
  }

  parse(text: string, name = ''): void {
    this.messages.push(serialize.parse({ text, name }));
  }

  bind(statement: string | undefined, values: unknown[] | undefined): void {
    this.messages.push(serialize.bind({ statement, values, valueMapper: prepareValue }));
  }

  describe(): void {
    this.messages.push(DESCRIBE_PORTAL);
  }

  execute(): void {
    this.messages.push(EXECUTE_PORTAL);
  }

  sync(): void {
    this.messages.push(SYNC);
  }

  /** As pg does, nothing goes to a socket that no longer takes writes: its error reaches the query on its own. */
  writeTo(connection: Connection): void {
    if (connection.stream.writable) connection.stream.write(Buffer.concat(this.messages));
  }
}

/** pg's Query, with steps missing from its published types. */
const Query = pg.Query as unknown as new (
  config: QueryConfig | string,
  values?: unknown[],
) => {
  text?: string;
  name?: string;
  values?: unknown[];
  types?: unknown;
  binary?: boolean;
  _result: Result;
  _accumulateRows?: unknown;
  hasBeenParsed(connection: Connection): boolean;
  handleRowDescription(message: { fields: FieldDef[] }): void;
  handleCommandComplete(message: unknown, connection: Connection): void;
  handleError(error: Error, connection: Connection): void;
  handleReadyForQuery(connection: Connection): void;
  _checkForMultirow(): void;
  callback?: (error: Error | null, result: QueryResult | QueryResult[]) => void;
  listeners(event: 'row'): unknown[];
};

/** What a named statement's rows look like: its fields and pg's parsers for them, as its first Describe answered. */
interface Described {
  text: string;
  fields: FieldDef[];
  parsers: unknown[] | undefined;
  empty: object | null;
}

/**
 * Per connection, the statements described there. A prepared statement's row description cannot change (PostgreSQL
 * refuses to run it if its result type would), so later executions skip the Describe: PostgreSQL sends no
 * RowDescription, and pg neither parses one nor builds its parsers again for every result.
 */
const described = new WeakMap<Connection, Map<string, Described>>();

/** One statement of a round trip, in order: whether its Describe goes out, and its description if it does not. */
interface Step {
  /** Set on a described step whose description is kept. */
  name?: string;
  text?: string;
  describes: boolean;
  known?: Described;
  rowsDescribed?: boolean;
}

/** A Parse written in the round trip: a named one is recorded when the server says it parsed it. */
interface Parse {
  named?: { name: string; text: string };
}

/**
 * One Sync: PostgreSQL skips all after the first failure, so a COMMIT in `after` commits only on success. A named
 * statement of `together` or `after` is parsed by its name where it is new (once per connection, so a generic plan can
 * serve it from then on, as it serves the first statement): pg records every ParseComplete as the first statement's,
 * so this query counts them, and records one of the others only once its own ParseComplete came back. The first
 * statement and those `together` with it are described once per connection (see `described`); `before` and `after`
 * are never described.
 */
class PipelinedQuery extends Query {
  private readonly parses: Parse[] = [];
  private listening?: { connection: Connection; onParse: () => void };
  private readonly steps: Step[] = [];
  private at = 0;
  private known?: Map<string, Described>;

  constructor(
    config: QueryConfig,
    private readonly before: readonly string[],
    private readonly after: readonly Statement[],
    private readonly together: readonly QueryConfig[] = [],
  ) {
    super(...queryArguments(config));
    this.name = config.name;
  }

  requiresPreparation(): boolean {
    return true;
  }

  /** pg's own steps (parse if new, bind, describe, execute), with `before`, `together` and `after` around them. */
  prepare(connection: Connection): void {
    this.known = describedOn(connection);
    const wire = new Wire();
    // Unnamed: pg records a parse as the named statement's, so a named one here could be recorded wrongly.
    for (const text of this.before) {
      writeUnnamed(wire, text);
      this.parses.push({});
      this.steps.push({ describes: false });
    }
    const parseAt = wire.size;
    try {
      this.writeStatements(connection, wire);
    } catch (error) {
      // A value pg cannot send. No statement of the round trip is sent: parsed and closed again, one would stay
      // recorded as parsed (pg takes the ParseComplete for it) and every later use of its name would fail. What went
      // before them ends with a Sync, and the count runs until ReadyForQuery, which forgets what pg recorded of them
      // (stopCounting).
      wire.truncate(parseAt);
      wire.sync();
      wire.writeTo(connection);
      this.countParses(connection);
      super.handleError(error as Error, connection);
      return;
    }
    wire.sync();
    wire.writeTo(connection);
    if (this.parses.some((parse) => parse.named)) this.countParses(connection);
    this.enter(this.steps[0]);
  }

  /** The first statement, then `together` and `after`: parse where new, bind, describe where not known, execute. */
  private writeStatements(connection: Connection, wire: Wire): void {
    if (!this.hasBeenParsed(connection)) {
      this.parses.push(this.name ? { named: { name: this.name, text: this.text! } } : {});
      wire.parse(this.text!, this.name);
      if (this.name) connection.submittedNamedStatements[this.name] = this.text!;
    }
    wire.bind(this.name, this.values);
    this.describe(wire, this.name, this.text);
    wire.execute();
    for (const statement of this.together) {
      const name = this.parseIfNew(connection, wire, statement);
      wire.bind(name, statement.values);
      this.describe(wire, name || undefined, statement.text);
      wire.execute();
    }
    for (const statement of this.after) {
      const name = this.parseIfNew(connection, wire, statement);
      wire.bind(name, typeof statement === 'string' ? [] : (statement.values ?? []));
      wire.execute();
      this.steps.push({ describes: false });
    }
  }

  override handleRowDescription(message: { fields: FieldDef[] }): void {
    super.handleRowDescription(message);
    const step = this.steps[this.at];
    if (!step?.describes) return;
    step.rowsDescribed = true;
    this.remember(step, this._result);
  }

  override handleCommandComplete(message: unknown, connection: Connection): void {
    const step = this.steps[this.at];
    // Described, and no RowDescription came: PostgreSQL answered NoData, a statement without rows.
    if (step?.describes && !step.rowsDescribed) this.remember(step);
    super.handleCommandComplete(message, connection);
    this.at += 1;
    this.enter(this.steps[this.at]);
  }

  override handleError(error: Error, connection: Connection): void {
    this.stopCounting();
    super.handleError(error, connection);
  }

  override handleReadyForQuery(connection: Connection): void {
    this.stopCounting();
    super.handleReadyForQuery(connection);
  }

  private describe(wire: Wire, name: string | undefined, text: string | undefined): void {
    // pg's parsers depend on a query's own types and format: only the default ones are kept, under a step's name.
    const kept = this.types || this.binary ? undefined : name;
    const known = kept === undefined ? undefined : this.known?.get(kept);
    if (known && known.text === text) {
      this.steps.push({ describes: false, known });
      return;
    }
    wire.describe();
    this.steps.push({ name: kept, text, describes: true });
  }

  /** A statement sent without its Describe: its result is the one pg would have made from the RowDescription. */
  private enter(step: Step | undefined): void {
    const known = step?.known;
    if (!known) return;
    this._checkForMultirow();
    const result = this._result;
    result.fields = known.fields;
    result._parsers = known.parsers;
    result._prebuiltEmptyResultObject = known.empty;
    this._accumulateRows = this.callback || this.listeners('row').length === 0;
  }

  private remember(step: Step, result?: Result): void {
    if (step.name === undefined || step.text === undefined) return;
    this.known?.set(step.name, {
      text: step.text,
      fields: result?.fields ?? [],
      parsers: result?._parsers,
      empty: result?._prebuiltEmptyResultObject ?? null,
    });
  }

  private countParses(connection: Connection): void {
    const onParse = (): void => {
      const parsed = this.parses.shift()?.named;
      if (!parsed) return;
      connection.parsedStatements[parsed.name] = parsed.text;
      delete connection.submittedNamedStatements[parsed.name];
    };
    connection.on('parseComplete', onParse);
    this.listening = { connection, onParse };
  }

  /** Parses the statement where this connection does not know it yet; answers the name to bind ('' for unnamed). */
  private parseIfNew(connection: Connection, wire: Wire, statement: Statement): string {
    const name = typeof statement === 'string' ? undefined : statement.name;
    const text = typeof statement === 'string' ? statement : statement.text;
    const known =
      name === undefined ? undefined : (connection.parsedStatements[name] ?? connection.submittedNamedStatements[name]);
    // A name pg knows for another text would be refused: that statement goes unnamed, as one without a name does.
    if (name === undefined || (known !== undefined && known !== text)) {
      wire.parse(text);
      this.parses.push({});
      return '';
    }
    if (known === undefined) {
      wire.parse(text, name);
      connection.submittedNamedStatements[name] = text;
      this.parses.push({ named: { name, text } });
    }
    return name;
  }

  /**
   * What did not come back parsed failed or was skipped after a failure: it is parsed again next time. pg may have
   * recorded the first statement on an earlier statement's ParseComplete, so that record goes too.
   */
  private stopCounting(): void {
    if (!this.listening) return;
    const { connection, onParse } = this.listening;
    this.listening = undefined;
    connection.removeListener('parseComplete', onParse);
    for (const { named } of this.parses.splice(0)) {
      if (!named) continue;
      delete connection.submittedNamedStatements[named.name];
      if (connection.parsedStatements[named.name] === named.text) delete connection.parsedStatements[named.name];
    }
  }
}

/** What pg's Query takes from a config besides its text, values and name. */
const QUERY_OPTIONS = ['types', 'rowMode', 'binary', 'rows', 'queryMode', 'portal', 'callback'] as const;

/**
 * pg copies a config object by its property descriptors, a cost in every round trip: one that carries no more than a
 * text, values and a name (every statement of the broker's) goes as its text and values, the name set afterwards.
 */
function queryArguments(config: QueryConfig): [QueryConfig | string, unknown[]?] {
  const other = config as { [key in (typeof QUERY_OPTIONS)[number]]?: unknown };
  return QUERY_OPTIONS.every((key) => other[key] === undefined) ? [config.text, config.values] : [config];
}

function describedOn(connection: Connection): Map<string, Described> {
  let known = described.get(connection);
  if (!known) {
    known = new Map();
    described.set(connection, known);
  }
  return known;
}

/** A text, or a statement with parameters, sent unnamed. */
type Statement = string | QueryConfig;

function writeUnnamed(wire: Wire, statement: Statement): void {
  const { text, values = [] } = typeof statement === 'string' ? { text: statement } : statement;
  wire.parse(text);
  wire.bind('', values);
  wire.execute();
}

/** One statement, with `before` ahead of it and `after` behind it (unread), in one round trip. */
export async function queryPipelined<R extends QueryResultRow>(
  client: PoolClient,
  statement: QueryConfig,
  before: readonly string[],
  after: readonly Statement[],
): Promise<QueryResult<R>> {
  return (await pipeline<R>(client, statement, [], before, after))[0];
}

/** One statement, with the BEGIN a DeferredBegin holds back ahead of it: described once per connection if named. */
export function queryNamed<R extends QueryResultRow>(
  client: PoolClient,
  statement: QueryConfig,
): Promise<QueryResult<R>> {
  return queryPipelined<R>(client, statement, DeferredBegin.takeFrom(client), []);
}

/**
 * Named statements that do not depend on each other's results, in one round trip, their results in order. Ahead of
 * them goes the BEGIN a DeferredBegin holds back.
 */
export function queryTogether(client: PoolClient, statements: readonly QueryConfig[]): Promise<QueryResult[]> {
  return queryAllPipelined(client, statements, DeferredBegin.takeFrom(client), []);
}

/**
 * Statements that do not depend on each other's results, every one's rows read, with `before` ahead of them and `after`
 * behind them (unread) in one round trip, those new to the connection parsed in it too.
 */
export function queryAllPipelined(
  client: PoolClient,
  statements: readonly QueryConfig[],
  before: readonly string[],
  after: readonly Statement[],
): Promise<QueryResult[]> {
  const [first, ...rest] = statements;
  return pipeline(client, first, rest, before, after);
}

async function pipeline<R extends QueryResultRow>(
  client: PoolClient,
  first: QueryConfig,
  together: readonly QueryConfig[],
  before: readonly string[],
  after: readonly Statement[],
): Promise<Array<QueryResult<R>>> {
  return new Promise((resolve, reject) => {
    const query = new PipelinedQuery(first, before, after, together);
    query.callback = (error, result) => {
      if (error) reject(error);
      // pg answers every statement of the round trip that ran, in order.
      else {
        const results = (Array.isArray(result) ? result : [result]) as Array<QueryResult<R>>;
        resolve(results.slice(before.length, before.length + 1 + together.length));
      }
    };
    void client.query(query as never);
  });
}

type Query = PoolClient['query'];

/** Saves BEGIN its own round trip by wrapping the client's query until the first statement; `end` unwraps it. */
export class DeferredBegin {
  private static readonly held = new WeakMap<PoolClient, DeferredBegin>();

  /** Whether BEGIN went out: if not, nothing ran, and there is nothing to commit or roll back. */
  sent = false;
  /** Why a BEGIN sent ahead of a callback-style query failed: the transaction must not commit. */
  failure?: Error;

  constructor(private readonly client: PoolClient) {
    const wrapped = (config: unknown, values?: unknown, callback?: unknown): unknown => {
      this.sent = true;
      this.end();
      return this.withBegin(config, values, callback);
    };
    client.query = wrapped as Query;
    DeferredBegin.held.set(client, this);
  }

  /** The statements to send ahead of the client's next one: BEGIN, if held back, which the caller now sends. */
  static takeFrom(client: PoolClient): string[] {
    const begin = DeferredBegin.held.get(client);
    if (!begin) return [];
    begin.sent = true;
    begin.end();
    return ['BEGIN'];
  }

  end(): void {
    if (DeferredBegin.held.get(this.client) === this) DeferredBegin.held.delete(this.client);
    delete (this.client as Partial<PoolClient>).query;
  }

  private withBegin(config: unknown, values: unknown, callback: unknown): unknown {
    const query = this.client.query.bind(this.client) as (...args: unknown[]) => unknown;
    const statement = asStatement(config, values);
    if (callback === undefined && statement && (statement.name || (statement.values?.length ?? 0) > 0)) {
      return queryPipelined(this.client, statement, ['BEGIN'], []);
    }
    // A simple query may hold several statements, which the extended protocol refuses: BEGIN goes first, alone.
    if (callback === undefined && typeof values !== 'function' && statement) {
      return this.client.query('BEGIN').then(() => query(config, values));
    }
    this.client.query('BEGIN').catch((error: Error) => (this.failure ??= error));
    return query(config, values, callback);
  }
}

function asStatement(config: unknown, values: unknown): QueryConfig | undefined {
  if (typeof config === 'string') return { text: config, values: values as unknown[] | undefined };
  if (typeof config !== 'object' || config === null || typeof (config as { submit?: unknown }).submit === 'function')
    return undefined;
  if (typeof values === 'function') return undefined;
  return values === undefined ? (config as QueryConfig) : { ...(config as QueryConfig), values: values as unknown[] };
}
