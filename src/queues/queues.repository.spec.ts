import type { Statement } from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';
import { ConsumerGroupsRepository } from '../consumer-groups/consumer-groups.repository';
import { QueuesRepository } from './queues.repository';

const TENANT = '00000000-0000-0000-0000-0000000000aa';

/** Runs each statement on fixed rows, keeping what was sent. */
function recordingReader(answers: unknown[][]): StatementReader & { sent: Array<Statement<unknown>> } {
  const sent: Array<Statement<unknown>> = [];
  const run = async <T>(statement: Statement<T>): Promise<T> => {
    sent.push(statement);
    return statement.parse(answers.shift() ?? []);
  };
  return {
    sent,
    run,
    runTogether: async (statements) => Promise.all(statements.map(run)) as never,
  };
}

describe('QueuesRepository statements', () => {
  it('configure sends the options once, however many options the UPDATE reads', () => {
    const statement = new QueuesRepository().configure(TENANT, 'orders', {
      options: { leaseTime: 30 },
      namespace: '',
      retention: {},
    });

    expect(statement.name).toBeUndefined();
    expect(statement.values).toEqual(['{"leaseTime":30}', '', null, TENANT, 'orders']);
    expect(statement.text).toContain("lease_time = COALESCE(($1::jsonb ->> 'leaseTime')::integer, lease_time)");
    expect(statement.text).toContain("namespace = CASE WHEN $2::text IS NULL THEN namespace ELSE NULLIF($2, '') END");
    expect(statement.text).toContain('WHERE tenant_id = $4 AND name = $5');
  });

  it('delete locks the cursors, then the queue, and stops when there was no queue', async () => {
    const reader = recordingReader([[], []]);

    expect(await new QueuesRepository().delete(reader, TENANT, 'orders')).toBeUndefined();
    expect(
      reader.sent.map((statement) => /(FOR UPDATE OF c|name = \$2 FOR UPDATE)$/.exec(statement.text)?.[0]),
    ).toEqual(['FOR UPDATE OF c', 'name = $2 FOR UPDATE']);
  });

  it('delete answers what the queue freed, as numbers', async () => {
    const reader = recordingReader([[], [{ id: 'q1' }], [{ messages: 3, bytes: '120' }]]);

    expect(await new QueuesRepository().delete(reader, TENANT, 'orders')).toEqual({ bytes: 120, messages: 3 });
    expect(reader.sent[2].values).toEqual([TENANT, 'q1']);
  });
});

describe('ConsumerGroupsRepository statements', () => {
  it('delete takes the locks in order, the last cursor lock NOWAIT, then deletes with one parameter per value', async () => {
    const reader = recordingReader([
      [],
      [],
      [],
      [{ queue_name: null, partition: null, last_offset: null, partitions: 4 }],
    ]);

    expect(await new ConsumerGroupsRepository().delete(reader, TENANT, 'g', undefined)).toEqual({
      moved: [],
      partitions: 4,
    });
    expect(reader.sent.map((statement) => /FOR UPDATE OF \w( NOWAIT)?$/.exec(statement.text)?.[0])).toEqual([
      'FOR UPDATE OF c',
      'FOR UPDATE OF q',
      'FOR UPDATE OF c NOWAIT',
      undefined,
    ]);
    expect(reader.sent.map((statement) => statement.values)).toEqual([
      [TENANT, 'g', null],
      [TENANT, null, 'g'],
      [TENANT, 'g', null],
      [TENANT, 'g', null],
    ]);
  });

  it('counts no partitions where there is no queue to count', async () => {
    const reader = recordingReader([]);

    expect(await new ConsumerGroupsRepository().partitionCounts(reader, TENANT, [])).toEqual(new Map());
    expect(reader.sent).toEqual([]);
  });
});
