import { DatabaseError } from 'pg';
import { QueryFailedError } from '../database/query-failed-error';
import {
  conflictOf,
  ConnectionLostError,
  databaseFailureOf,
  databaseFailureText,
  DatabaseTimeoutError,
  PoolUnavailableError,
} from './database-errors';

function serverError(code: string, message: string): DatabaseError {
  const error = new DatabaseError(message, message.length, 'error');
  error.code = code;
  return error;
}

function networkError(code: string): Error {
  return Object.assign(new Error(`read ${code}`), { code });
}

describe('databaseFailureOf', () => {
  it.each([
    ['no connection from the pool', new PoolUnavailableError(new Error('timeout exceeded when trying to connect'))],
    ['a reset mid-statement', networkError('ECONNRESET')],
    ['a refused connection', networkError('ECONNREFUSED')],
    ['a connection closed under a statement', new Error('Connection terminated unexpectedly')],
    ['a statement sent on a closed client', new Error('Client was closed and is not queryable')],
    ['a server in recovery (57P03)', serverError('57P03', 'the database system is in recovery mode')],
    ['a server shutting down (57P01)', serverError('57P01', 'terminating connection due to administrator command')],
    [
      'a session ended for idling in a transaction (25P03)',
      serverError('25P03', 'terminating connection due to idle-in-transaction timeout'),
    ],
    ['a connection exception (class 08)', serverError('08006', 'connection failure')],
    ['too many connections (53300)', serverError('53300', 'sorry, too many clients already')],
    [
      'a write refused by a standby or a read-only session (25006)',
      new QueryFailedError('INSERT', [], serverError('25006', 'cannot execute INSERT in a read-only transaction')),
    ],
    [
      'any error after the connection died under a unit of work',
      new ConnectionLostError(serverError('57P01', 'terminating connection due to administrator command')),
    ],
  ])('calls %s unavailable: the contract\'s "pool"', (_case, error) => {
    expect(databaseFailureOf(error)).toBe('unavailable');
    expect(databaseFailureText(databaseFailureOf(error)!)).toBe('pool');
  });

  it.each([
    ['the unit of work running out of time', new DatabaseTimeoutError(6000)],
    ['the server cancelling a statement (57014)', serverError('57014', 'canceling statement due to statement timeout')],
    ["pg's own read timeout", new Error('Query read timeout')],
  ])('calls %s a timeout: "database timeout"', (_case, error) => {
    expect(databaseFailureOf(error)).toBe('timeout');
    expect(databaseFailureText(databaseFailureOf(error)!)).toBe('database timeout');
  });

  it("looks through TypeORM's QueryFailedError at the driver error", () => {
    const wrapped = new QueryFailedError('SELECT 1', [], networkError('ECONNRESET'));
    expect(databaseFailureOf(wrapped)).toBe('unavailable');
  });

  it.each([
    ['a unique violation', serverError('23505', 'duplicate key value violates unique constraint "pk_messages"')],
    ['a syntax error', serverError('42601', 'syntax error at or near "SELEC"')],
    ['a bug of ours', new TypeError("Cannot read properties of undefined (reading 'id')")],
  ])('leaves %s to the generic handling: the database itself is fine', (_case, error) => {
    expect(databaseFailureOf(error)).toBeUndefined();
  });
});

describe('conflictOf', () => {
  it.each([
    ['a deadlock (40P01)', serverError('40P01', 'deadlock detected'), '40P01'],
    [
      'a serialization failure (40001)',
      serverError('40001', 'could not serialize access due to concurrent update'),
      '40001',
    ],
    [
      "a deadlock seen through TypeORM's QueryFailedError",
      new QueryFailedError('SELECT 1', [], serverError('40P01', 'deadlock detected')),
      '40P01',
    ],
  ])('calls %s a conflict to run the unit of work again for', (_case, error, conflict) => {
    expect(conflictOf(error)).toBe(conflict);
    // Not a failure of the database: answered as it always was once the attempts are spent.
    expect(databaseFailureOf(error)).toBeUndefined();
  });

  it.each([
    ['a unique violation', serverError('23505', 'duplicate key value violates unique constraint "pk_messages"')],
    ['a lock not available (55P03)', serverError('55P03', 'could not obtain lock on row')],
    ['a statement timeout', serverError('57014', 'canceling statement due to statement timeout')],
    [
      'a unit of work out of time, whatever it was waiting for',
      new DatabaseTimeoutError(6000, serverError('40P01', 'x')),
    ],
    ['a lost connection', new ConnectionLostError(serverError('40P01', 'deadlock detected'))],
    ['a bug of ours', new TypeError("Cannot read properties of undefined (reading 'id')")],
  ])('leaves %s alone', (_case, error) => {
    expect(conflictOf(error)).toBeUndefined();
  });
});
