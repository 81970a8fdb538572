import { Statement } from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { StreamsRepository } from './streams.repository';

const FREED =
  '-COALESCE((SELECT sum(bytes) FROM gone), 0) AS bytes,\n              -(SELECT count(*) FROM gone)::int AS entries';

/** Records what it is given to run and answers `rows` in turn. */
function reader(...answers: unknown[][]): StatementReader & { sent: Statement<unknown>[] } {
  const sent: Statement<unknown>[] = [];
  return {
    sent,
    run: <T>(statement: Statement<T>) => {
      sent.push(statement);
      return Promise.resolve(statement.parse(answers[sent.length - 1] ?? []));
    },
    runTogether: () => Promise.reject(new Error('not expected')),
  };
}

describe('StreamsRepository', () => {
  const streams = new StreamsRepository();

  it('counts the state a deletion frees with one piece of SQL, for a query and for a reset', async () => {
    const deleted = streams.delete('t1', 'clicks');
    expect(deleted.name).toBeUndefined();
    expect(deleted.text).toContain(`SELECT (SELECT count(*) FROM d)::int AS deleted, ${FREED}`);
    expect(deleted.values).toEqual(['t1', 'clicks']);
    expect(deleted.parse([{ deleted: 1, bytes: '-42', entries: -3 }])).toEqual({ bytes: -42, messages: -3 });
    expect(deleted.parse([{ deleted: 0, bytes: '0', entries: 0 }])).toBeUndefined();

    const reset = reader([{ bytes: '-10', entries: -2 }], []);
    const freed = await streams.update(reset, 't1', 'q1', 'src', null, 'h2', true);
    expect(freed).toEqual({ bytes: -10, messages: -2 });
    expect(reset.sent).toHaveLength(2);
    expect(reset.sent[0].text).toBe(
      `WITH gone AS (DELETE FROM stream_state WHERE tenant_id = $1 AND query_id = $2 RETURNING bytes)\n       SELECT ${FREED}`,
    );
    expect(reset.sent[0].values).toEqual(['t1', 'q1']);
  });

  it('updates a registration without a reset in one statement, freeing nothing', async () => {
    const update = reader([]);
    expect(await streams.update(update, 't1', 'q1', 'src', 'sink', 'h2', false)).toEqual({ bytes: 0, messages: 0 });
    expect(update.sent.map((statement) => statement.values)).toEqual([['src', 'sink', 'h2', 't1', 'q1']]);
  });

  it('sends nothing for a cycle without state operations', () => {
    expect(streams.applyState('t1', 'q1', 'p1', [])).toBeUndefined();
  });
});
