import { InternalServerErrorException } from '@nestjs/common';
import { QueryFailedError } from '../database/query-failed-error';
import { errorMessage } from './error-message';

export class PoolUnavailableError extends Error {
  constructor(cause: unknown) {
    super('pool', { cause });
    this.name = 'PoolUnavailableError';
  }
}

/** Whether a COMMIT already sent took effect is unknown to the broker. */
export class DatabaseTimeoutError extends Error {
  constructor(
    readonly budgetMs: number,
    cause?: unknown,
  ) {
    super('database timeout', { cause });
    this.name = 'DatabaseTimeoutError';
  }
}

/** A 500 whose text names what the database did (`renew failed: ...`): logged as a warning, like `pool`. */
export class DatabaseFailureException extends InternalServerErrorException {
  constructor(error: string, cause: unknown) {
    super({ error }, { cause });
  }
}

/** What fails after the connection died is only a symptom (a client not queryable): the cause is the connection's own error. */
export class ConnectionLostError extends Error {
  constructor(cause: unknown) {
    super('connection lost', { cause });
    this.name = 'ConnectionLostError';
  }
}

export type DatabaseFailure = 'unavailable' | 'timeout';

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // Server shutting down, crashed or recovering; our session was terminated; no connection slot.
  '57P01',
  '57P02',
  '57P03',
  '57P05',
  '25P03',
  '53300',
  // A write refused by a standby (a demoted primary) or a read-only session: not this primary any more.
  '25006',
]);

const UNAVAILABLE_MESSAGES = [
  /timeout exceeded when trying to connect/i,
  /connection terminated/i,
  /is not queryable/i,
  /the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)/i,
  /terminating connection/i,
];

/** Anything else, a constraint violation say, is a failed statement on a healthy database: undefined. */
export function databaseFailureOf(error: unknown): DatabaseFailure | undefined {
  if (error instanceof PoolUnavailableError || error instanceof ConnectionLostError) return 'unavailable';
  if (error instanceof DatabaseTimeoutError) return 'timeout';
  const driverError = (error as { driverError?: unknown } | null)?.driverError ?? error;
  const code = (driverError as { code?: unknown } | null)?.code;
  const message = errorMessage(driverError);
  if (typeof code === 'string') {
    // 57014: statement_timeout (or a cancel); class 08: connection exceptions.
    if (code === '57014') return 'timeout';
    if (UNAVAILABLE_CODES.has(code) || code.startsWith('08')) return 'unavailable';
  }
  if (/query read timeout/i.test(message)) return 'timeout';
  if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))) return 'unavailable';
  return undefined;
}

/**
 * A statement a healthy database refused for what it was sent (a constraint, a bad value), as "SQLSTATE text" for the
 * log: the text can quote what the caller sent, so it goes to the log and the caller gets a fixed answer. Undefined
 * for anything else, a failure of the database included.
 */
export function refusedStatementOf(error: unknown): string | undefined {
  if (!(error instanceof QueryFailedError) || databaseFailureOf(error) !== undefined) return undefined;
  const { code } = error.driverError as { code?: string };
  return `${code ?? ''} ${error.message}`;
}

/** PostgreSQL gave up this transaction, not the work: it rolled it back, and running it again can succeed. */
export type Conflict = '40P01' | '40001';

const CONFLICTS: Readonly<Record<Conflict, string>> = { '40P01': 'deadlock', '40001': 'serialization failure' };

/** A deadlock (40P01) or a serialization failure (40001); undefined for anything else, a lost connection included. */
export function conflictOf(error: unknown): Conflict | undefined {
  if (error instanceof DatabaseTimeoutError || error instanceof ConnectionLostError) return undefined;
  const driverError = (error as { driverError?: unknown } | null)?.driverError ?? error;
  const code = (driverError as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001' ? code : undefined;
}

export function conflictName(conflict: Conflict): string {
  return CONFLICTS[conflict];
}

export function databaseFailureText(failure: DatabaseFailure): string {
  return failure === 'unavailable' ? 'pool' : 'database timeout';
}
