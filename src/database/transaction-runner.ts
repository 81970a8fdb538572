import { Inject, Injectable } from '@nestjs/common';
import type { PoolClient, QueryConfig } from 'pg';
import { ConnectionLostError, databaseFailureOf } from '../common/database-errors';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { Database, queryEach, Session, sessionOf } from './database';
import { acquireWithin, monotonicNow, withinBudget, workBudgetMs } from './deadline';
import { asQueryFailed, DatabaseEngine } from './database-engine';
import { canRollBack } from './guarded-pool';
import { DeferredBegin, queryAllPipelined } from './pipelined-query';
import { ConflictRetries } from './conflict-retries';
import { Statement } from './statement';
import { answersOf, type Answers } from './unit-of-work';
import { TenantGate } from './tenant-gate';

/** What a unit of work sends with its COMMIT, in COMMIT's round trip. */
export interface CommitWith {
  statement?: QueryConfig;
  /** After `statement`: what the unit changed in its tenant's stored usage, the transaction's last write. */
  usage?: QueryConfig;
  /** Statements without parameters to run just before COMMIT. */
  before: string[];
  /** Before `statement`: a write the unit deferred to its next round trip, this one (UnitOfWork.withNext). */
  first?: readonly QueryConfig[];
  /** After `usage`: reads that raise to roll the transaction back (UnitOfWork.checkAtCommit). */
  checks?: readonly QueryConfig[];
}

/** A statement as the transaction sends it: its rows are the caller's to read. */
export type SentStatement = QueryConfig & { values: unknown[] };

/** The transaction a unit of work runs in, as the work sees it. */
export interface OpenTransaction {
  /** The statement's rows, prepared when it has a name (DatabaseEngine.rows). */
  rows(statement: SentStatement): Promise<unknown[]>;
  /** Statements that do not need each other's rows, in one round trip on PostgreSQL (preparedTogether). */
  rowsTogether(statements: readonly SentStatement[]): Promise<unknown[][]>;
  /**
   * Runs the statements and commits in one round trip, and returns each one's rows; only reads may follow. On the
   * embedded database, whose COMMIT takes a round trip of its own anyway, it commits at the end as usual.
   */
  commitWith(statements: readonly SentStatement[]): Promise<unknown[][]>;
}

/** Reads (or writes with no effects after commit) as statements: what run() hands a read's work. */
export interface StatementReader {
  run<T>(statement: Statement<T>): Promise<T>;
  runTogether<S extends readonly Statement<unknown>[]>(statements: S): Promise<Answers<S>>;
}

/** What read() hands its work: a reader that may end with a statement sent with its COMMIT. */
export interface Reading extends StatementReader {
  /** The read's last statement, in one round trip with COMMIT (OpenTransaction.commitWith); nothing may follow. */
  last<T>(statement: Statement<T>): Promise<T>;
}

/** Past its budget the connection is closed so the server rolls back: none goes back with a transaction open. */
@Injectable()
export class TransactionRunner {
  private readonly budgetMs: number;
  private readonly acquireTimeoutMs: number;
  private readonly gate: TenantGate;

  constructor(
    private readonly database: Database,
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly engine: DatabaseEngine,
    private readonly retries: ConflictRetries,
  ) {
    this.budgetMs = workBudgetMs(config.database);
    this.acquireTimeoutMs = config.database.acquireTimeoutMs;
    this.gate = new TenantGate(config.limits.tenantMaxConnections);
  }

  /**
   * One statement in a bounded transaction of its own, as run() runs work, sent with its BEGIN and COMMIT in one round
   * trip; its answer parsed.
   */
  runOne<T>(tenantId: string | undefined, statement: Statement<T>): Promise<T> {
    return this.read(tenantId, (reader) => reader.last(statement));
  }

  /** Statements in one bounded transaction, as run() runs work; for work without effects after commit (see Writes). */
  read<T>(tenantId: string | undefined, work: (reader: Reading) => Promise<T>): Promise<T> {
    return this.run(tenantId, (_session, transaction) => {
      let ended = false;
      const open = (): void => {
        if (ended) throw new Error('a read runs nothing after its last statement');
      };
      return work({
        run: async (statement) => {
          open();
          return statement.parse(await transaction.rows(statement));
        },
        runTogether: async (statements) => {
          open();
          return answersOf(statements, await transaction.rowsTogether(statements));
        },
        last: async (statement) => {
          open();
          ended = true;
          return statement.parse((await transaction.commitWith([statement]))[0]);
        },
      });
    });
  }

  /** The pool was resized: one tenant's share follows it. */
  resizeTenantShare(maxPerTenant: number): void {
    this.gate.resize(maxPerTenant);
  }

  /**
   * `tenantId` undefined: work on no tenant's behalf (the health check), outside any tenant's share. A deadlock or a
   * serialization failure rolls the work back and runs it again from the start, while the bound allows.
   */
  async run<T>(
    tenantId: string | undefined,
    work: (session: Session, transaction: OpenTransaction) => Promise<T>,
    withCommit?: () => CommitWith,
  ): Promise<T> {
    const started = monotonicNow();
    const deadline = started + this.acquireTimeoutMs + this.budgetMs;
    const leave = tenantId === undefined ? () => undefined : await this.gate.enter(tenantId, this.acquireTimeoutMs);
    try {
      for (let attempt = 1; ; attempt += 1) {
        // The first attempt has the whole bound; a retry what is left of it.
        const acquireMs =
          attempt === 1
            ? this.acquireTimeoutMs - (monotonicNow() - started)
            : Math.min(this.acquireTimeoutMs, deadline - monotonicNow());
        try {
          return await this.attempt(acquireMs, deadline, work, withCommit);
        } catch (error) {
          const pauseMs = this.retries.after(error, attempt, deadline);
          if (pauseMs === undefined) throw error;
          await new Promise((resolve) => setTimeout(resolve, pauseMs));
        }
      }
    } finally {
      leave();
    }
  }

  private async attempt<T>(
    acquireMs: number,
    deadline: number,
    work: (session: Session, transaction: OpenTransaction) => Promise<T>,
    withCommit?: () => CommitWith,
  ): Promise<T> {
    const client = await acquireWithin(this.database.pool, acquireMs);
    let lostWith: Error | undefined;
    const onLost = (error: Error): void => {
      lostWith ??= error;
    };
    client.on('error', onLost);
    try {
      return await withinBudget(client, Math.min(this.budgetMs, deadline - monotonicNow()), async () => {
        const begin = await this.begin(client);
        let commitAsked = false;
        let committed = false;
        const commitWith = async (statements: readonly SentStatement[]): Promise<unknown[][]> => {
          if (commitAsked) throw new Error('a unit of work commits once');
          commitAsked = true;
          // The embedded database's: the statements one at a time, the COMMIT when the work is done.
          if (!begin) return this.engine.preparedTogether(client, statements);
          const found = await this.commit(client, begin, withCommit?.(), statements);
          committed = true;
          return found;
        };
        const transaction: OpenTransaction = {
          rows: (statement) => this.engine.rows(client, statement),
          rowsTogether: (statements) => this.engine.preparedTogether(client, statements),
          commitWith,
        };
        try {
          const result = await work(sessionOf(client), transaction);
          if (!committed) {
            await this.commit(client, begin, withCommit?.());
            committed = true;
          }
          return result;
        } catch (error) {
          // Open once BEGIN went out and until a COMMIT answered.
          const open = !committed && (begin ? begin.sent : true);
          if (open && canRollBack(client, error)) await client.query('ROLLBACK').catch(() => undefined);
          throw lostWith && !databaseFailureOf(error) ? new ConnectionLostError(lostWith) : error;
        } finally {
          begin?.end();
        }
      });
    } finally {
      client.removeListener('error', onLost);
      // A lost connection goes back with its error, so the pool closes it rather than handing it out again.
      client.release(lostWith);
    }
  }

  /**
   * BEGIN, deferred to the first statement on PostgreSQL; sent now on the embedded database, which runs the rest
   * unnamed.
   */
  private async begin(client: PoolClient): Promise<DeferredBegin | undefined> {
    if (this.engine.isEmbedded) {
      await client.query('BEGIN');
      return undefined;
    }
    return new DeferredBegin(client);
  }

  /**
   * One round trip: if a statement before COMMIT fails, the server skips the rest and the transaction rolls back.
   * Answers the rows of the statements the work committed with, the unit's last statement being sent unread.
   */
  private async commit(
    client: PoolClient,
    begin: DeferredBegin | undefined,
    { statement: last, usage, before, first = [], checks = [] }: CommitWith = { before: [] },
    read?: readonly SentStatement[],
  ): Promise<unknown[][]> {
    if (read && (last || usage || first.length > 0)) {
      throw new Error('a unit of work that commits with a statement has no last statement');
    }
    const sent = [...first, ...(read ?? [last]), usage, ...checks].filter((given) => given !== undefined);
    const [statement] = sent;
    if (begin?.failure) throw begin.failure;
    const beginWith = begin && !begin.sent ? ['BEGIN'] : [];
    begin?.end();
    if (beginWith.length > 0 && !statement) {
      // Nothing ran, so nothing is written; the NOTIFYs still go out.
      if (before.length > 0) await sendSimple(client, before.join('; '));
      return [];
    }
    if (statement && begin) {
      begin.sent = true;
      // Only the statements committed with are read; the rest go unread behind them.
      const reads = read?.length ?? 1;
      let found: unknown[][];
      try {
        const results = await queryAllPipelined(client, sent.slice(0, reads), beginWith, [
          ...sent.slice(reads),
          ...before,
          'COMMIT',
        ]);
        found = results.map((result) => result.rows as unknown[]);
      } catch (error) {
        throw asQueryFailed(statement.text, statement.values, error);
      }
      return found;
    }
    await queryEach(client, sent);
    await sendSimple(client, [...before, 'COMMIT'].join('; '));
    return [];
  }
}

async function sendSimple(client: PoolClient, text: string): Promise<void> {
  try {
    await client.query(text);
  } catch (error) {
    throw asQueryFailed(text, undefined, error);
  }
}
