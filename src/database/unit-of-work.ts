import { Logger } from '@nestjs/common';
import type { UsageChange, UsageRecord } from '../limits/stored-usage.repository';
import type { Session } from './database';
import { Statement } from './statement';
import type { OpenTransaction } from './transaction-runner';
import type { QueueWork, Redelivery } from '../wakeup/parked-polls';
import { errorMessage } from '../common/error-message';

/** A unit's last statement that records, as well, what the unit stores (undefined: nothing changed). */
export type RecordingStatement = (usage: UsageRecord | undefined) => Statement<unknown>;

/** What runTogether answers: each statement's parsed rows, in order. */
export type Answers<S extends readonly Statement<unknown>[]> = { -readonly [K in keyof S]: Answer<S[K]> };
type Answer<S> = S extends Statement<infer T> ? T : never;

/** Each statement's answer from its rows, which start at `from` among the rows of the round trip. */
export function answersOf<S extends readonly Statement<unknown>[]>(
  statements: S,
  found: unknown[][],
  from = 0,
): Answers<S> {
  return statements.map((statement, index) => statement.parse(found[from + index])) as Answers<S>;
}

interface Settle {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Nothing recorded here happens for a write that rolls back. */
export class UnitOfWork {
  readonly pushed = new Map<string, QueueWork>();
  readonly redelivered: Redelivery[] = [];
  /** Queues this write deleted, which other processes hear of to drop what they keep of them. */
  readonly deletedQueues: string[] = [];
  private readonly effects: Array<() => void> = [];
  private last?: Statement<unknown> | RecordingStatement;
  private readonly checks: Statement<unknown>[] = [];
  private readonly deferred: Statement<unknown>[] = [];
  /** Reads sent behind the next round trip's own statements (readAfterNext). */
  private readonly trailing: Statement<unknown>[] = [];
  /** What waits for a deferred read's answer (withNextRead). */
  private readonly awaiting = new Map<Statement<unknown>, Settle>();
  private change?: UsageChange & { held: boolean };

  constructor(
    readonly tenantId: string,
    readonly session: Session,
    private readonly transaction: OpenTransaction,
  ) {}

  /** Runs the statement now (after a deferred write, in its round trip) and answers what its rows say. */
  async run<T>(statement: Statement<T>): Promise<T> {
    if (this.deferred.length > 0 || this.trailing.length > 0) return (await this.runTogether([statement] as const))[0];
    return statement.parse(await this.transaction.rows(statement));
  }

  /** Statements that do not need each other's answers, in one round trip on PostgreSQL; their answers in order. */
  async runTogether<S extends readonly Statement<unknown>[]>(statements: S): Promise<Answers<S>> {
    const ahead = this.deferred.splice(0);
    const behind = this.trailing.splice(0);
    let found: unknown[][];
    try {
      found = await this.transaction.rowsTogether([...ahead, ...statements, ...behind]);
    } catch (error) {
      for (const statement of [...ahead, ...behind]) this.settled(statement)?.reject(error);
      throw error;
    }
    ahead.forEach((statement, index) => this.settled(statement)?.resolve(statement.parse(found[index])));
    const behindFrom = ahead.length + statements.length;
    behind.forEach((statement, index) => this.settled(statement)?.resolve(statement.parse(found[behindFrom + index])));
    return answersOf(statements, found, ahead.length);
  }

  private settled(statement: Statement<unknown>): Settle | undefined {
    const settle = this.awaiting.get(statement);
    this.awaiting.delete(statement);
    return settle;
  }

  /** The statement and COMMIT in one round trip, with the NOTIFYs recorded so far; only reads may follow. */
  async commitWith<T>(statement: Statement<T>): Promise<T> {
    return (await this.commitWithAll([statement] as const))[0];
  }

  /** As commitWith, for statements that do not need each other's answers: every one's answer, in order. */
  async commitWithAll<S extends readonly Statement<unknown>[]>(statements: S): Promise<Answers<S>> {
    return answersOf(statements, await this.transaction.commitWith(statements));
  }

  push(queue: string, partition: string, count = 1): void {
    const partitions = this.pushed.get(queue) ?? new Map<string, number>();
    partitions.set(partition, (partitions.get(partition) ?? 0) + count);
    this.pushed.set(queue, partitions);
  }

  redeliver(redelivery: Redelivery): void {
    this.redelivered.push(redelivery);
  }

  queueDeleted(queue: string): void {
    this.deletedQueues.push(queue);
  }

  /**
   * Sent with its COMMIT in one round trip; its rows are not read. Built at commit, a recording statement also
   * records what the unit stores (usageCtes), which saves a statement of its own.
   */
  lastly(statement: Statement<unknown> | RecordingStatement): void {
    if (this.last) throw new Error('a unit of work has one last statement');
    this.last = statement;
  }

  get lastStatement(): Statement<unknown> | RecordingStatement | undefined {
    return this.last;
  }

  /**
   * A write sent with the unit's next round trip, ahead of what goes in it: its next statements, or its COMMIT and last
   * statement. For a write nothing reads back before then, which saves it a round trip of its own. In the COMMIT's
   * round trip all but the first statement are sent unread and must answer no rows: a deferred write answers none.
   */
  withNext(statement: Statement<unknown>): void {
    this.deferred.push(statement);
  }

  /**
   * A read sent with the unit's next round trip (as withNext), answered when that round trip is: a lock whose answer is
   * needed later, not before the next statements. The next round trip must be a statement's, not the COMMIT's, whose
   * deferred part is not read.
   */
  withNextRead<T>(statement: Statement<T>): Promise<T> {
    this.withNext(statement);
    return this.answerOf(statement);
  }

  /**
   * A read sent in the unit's next round trip behind that round trip's own statements, answered when it is: one
   * whose locks come after theirs and that they do not wait for. As withNextRead, the next round trip must be a
   * statement's.
   */
  readAfterNext<T>(statement: Statement<T>): Promise<T> {
    this.trailing.push(statement);
    return this.answerOf(statement);
  }

  private answerOf<T>(statement: Statement<T>): Promise<T> {
    const answer = new Promise<T>((resolve, reject) => this.awaiting.set(statement, { resolve, reject }));
    // A unit that fails before the read is sent, or with it, throws there: this answer then has no reader.
    answer.catch(() => undefined);
    return answer;
  }

  get deferredStatements(): readonly Statement<unknown>[] {
    if (this.awaiting.size > 0) throw new Error('a deferred read reached the COMMIT, whose deferred rows are not read');
    return this.deferred;
  }

  /**
   * A check sent after the last statement, in the COMMIT's round trip, unread: one that raises rolls the whole unit
   * back there (a transaction's required leases, held to the end); one that passes answers no rows.
   */
  checkAtCommit(statement: Statement<unknown>): void {
    this.checks.push(statement);
  }

  get commitChecks(): readonly Statement<unknown>[] {
    return this.checks;
  }

  /**
   * Bytes and messages this write stores (negative: frees), recorded by the unit's very last statement; `held` when
   * the storage quotas apply to the write (it pushes), which that statement then refuses past a quota.
   */
  stores(change: UsageChange, held = false): void {
    if (change.bytes === 0 && change.messages === 0 && !held) return;
    this.change ??= { bytes: 0, messages: 0, held: false };
    this.change.bytes += change.bytes;
    this.change.messages += change.messages;
    this.change.held ||= held;
  }

  get storedChange(): (UsageChange & { held: boolean }) | undefined {
    return this.change;
  }

  afterCommit(effect: () => void): void {
    this.effects.push(effect);
  }

  runEffects(logger: Logger): void {
    for (const effect of this.effects) {
      try {
        effect();
      } catch (error) {
        logger.error(`An effect after commit failed: ${errorMessage(error)}`);
      }
    }
  }
}
