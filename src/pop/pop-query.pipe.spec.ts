import { BadRequestException } from '@nestjs/common';
import { PopQueryPipe } from './pop-query.pipe';

describe('PopQueryPipe', () => {
  const query = { batch: '10', wait: 'true', timeout: '2000', consumerGroup: 'stage-one' };

  it('answers a query seen before as it did then, with options of its own each time', () => {
    const pipe = new PopQueryPipe();
    const first = pipe.transform({ ...query });
    first.subscriptionFrom = '2026-12-06T00:00:00Z';
    first.batch = 1;

    const second = pipe.transform({ ...query });

    expect(second).not.toBe(first);
    expect(second).toEqual({
      batch: 10,
      partitions: 1,
      wait: true,
      timeoutMs: 2000,
      leaseSeconds: undefined,
      consumerGroup: 'stage-one',
      subscriptionMode: 'all',
      subscriptionFrom: undefined,
      autoAck: false,
    });
  });

  it('tells queries apart by every value, and keeps "now" a start the pop takes from the database each time', () => {
    const pipe = new PopQueryPipe();
    pipe.transform({ ...query, subscriptionFrom: 'now' });

    expect(pipe.transform({ ...query, subscriptionFrom: 'now' })).toMatchObject({
      subscriptionMode: 'new',
      subscriptionFrom: undefined,
    });
    expect(pipe.transform({ ...query, consumerGroup: 'stage-two' }).consumerGroup).toBe('stage-two');
    expect(pipe.transform({ ...query, batch: '11' }).batch).toBe(11);
  });

  it('refuses an invalid query every time it comes, and keeps none', () => {
    const pipe = new PopQueryPipe();
    for (let attempt = 0; attempt < 2; attempt += 1) {
      expect(refusal(() => pipe.transform({ ...query, batch: '0' }))).toEqual({
        error: 'batch must be an integer between 1 and 10000',
      });
    }
    expect(pipe.rememberedQueries).toBe(0);
  });

  it('keeps at most 256 queries, the latest ones, and none longer than 1024 characters', () => {
    const pipe = new PopQueryPipe();
    for (let group = 0; group < 300; group += 1) pipe.transform({ ...query, consumerGroup: `group-${group}` });
    expect(pipe.rememberedQueries).toBe(256);
    expect(pipe.transform({ ...query, consumerGroup: 'group-299' }).consumerGroup).toBe('group-299');

    const fresh = new PopQueryPipe();
    // Queen's clients send keys the broker accepts and does not read, of any length.
    expect(fresh.transform({ ...query, task: 't'.repeat(1024) }).batch).toBe(10);
    expect(fresh.rememberedQueries).toBe(0);
  });
});

function refusal(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    if (error instanceof BadRequestException) return error.getResponse();
    throw error;
  }
  throw new Error('not refused');
}
