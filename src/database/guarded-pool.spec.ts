import { DatabaseError, PoolClient } from 'pg';
import { QueryFailedError } from './query-failed-error';
import { canRollBack, unsafeState } from './guarded-pool';

/** The two things the driver tells about a connection: ReadyForQuery seen, and the server's transaction status. */
function connection(readyForQuery: boolean, status: 'I' | 'T' | 'E' | null): PoolClient {
  return { readyForQuery, getTransactionStatus: () => status } as unknown as PoolClient;
}

const refused = new DatabaseError('division by zero', 16, 'error');

describe('unsafeState', () => {
  it('lets an idle connection outside any transaction go back to the pool', () => {
    expect(unsafeState(connection(true, 'I'))).toBeUndefined();
  });

  it('lets a connection go that has just connected and never sent a statement (its first ReadyForQuery still being handled)', () => {
    expect(unsafeState(connection(false, null))).toBeUndefined();
  });

  it.each<[string, PoolClient, string]>([
    ['inside a transaction', connection(true, 'T'), 'inside a transaction'],
    ['inside a failed transaction', connection(true, 'E'), 'inside a failed transaction'],
    ['with a statement still running (a client-side timeout)', connection(false, 'I'), 'with a statement in flight'],
    [
      'waiting for the answer to a statement inside a transaction',
      connection(false, 'T'),
      'with a statement in flight',
    ],
  ])('refuses a connection %s', (_case, client, state) => {
    expect(unsafeState(client)).toBe(state);
  });
});

describe('canRollBack', () => {
  it('sends ROLLBACK after the server refused a statement, even before its ReadyForQuery arrived', () => {
    expect(canRollBack(connection(false, 'T'), refused)).toBe(true);
    expect(canRollBack(connection(false, 'T'), new QueryFailedError('SELECT 1/0', [], refused))).toBe(true);
  });

  it('sends ROLLBACK after our own code threw between statements', () => {
    expect(canRollBack(connection(true, 'T'), new Error('queue orders not found'))).toBe(true);
  });

  it('does not after a client-side timeout or a lost connection: the statement may still be running', () => {
    expect(canRollBack(connection(false, 'T'), new Error('Query read timeout'))).toBe(false);
    expect(
      canRollBack(connection(false, 'T'), Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })),
    ).toBe(false);
  });
});
