import { DatabaseError } from 'pg';
import { QueryFailedError } from '../database/query-failed-error';
import { retriedWhileLocked } from './consumer-groups.service';

function failed(code: string): QueryFailedError {
  const error = new DatabaseError('failed', 0, 'error');
  error.code = code;
  return new QueryFailedError('SELECT 1 FROM queues q ... FOR UPDATE OF q', [], error);
}

/** Work that fails with `code` the first `failures` times, then answers. */
function failing(code: string, failures: number): { work: () => Promise<string>; calls: () => number } {
  let calls = 0;
  return {
    work: () => {
      calls += 1;
      return calls <= failures ? Promise.reject(failed(code)) : Promise.resolve('done');
    },
    calls: () => calls,
  };
}

describe('retriedWhileLocked (a consumer group delete)', () => {
  it.each([
    ['a row locked NOWAIT', '55P03'],
    ['a deadlock lost to a push', '40P01'],
  ])('runs the work again after %s', async (_name, code) => {
    const { work, calls } = failing(code, 2);
    await expect(retriedWhileLocked(work)).resolves.toBe('done');
    expect(calls()).toBe(3);
  });

  it('gives up after five attempts, with the last error', async () => {
    const { work, calls } = failing('40P01', 10);
    await expect(retriedWhileLocked(work)).rejects.toBeInstanceOf(QueryFailedError);
    expect(calls()).toBe(5);
  });

  it('answers any other failure at once', async () => {
    const { work, calls } = failing('23505', 1);
    await expect(retriedWhileLocked(work)).rejects.toBeInstanceOf(QueryFailedError);
    expect(calls()).toBe(1);
  });
});
