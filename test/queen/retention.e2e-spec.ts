import { sleep } from '../support/sleep';
import { NestExpressApplication } from '@nestjs/platform-express';
import { ScratchDatabase } from '../support/scratch-database';
import { createTestApp, newTenant, onEmbeddedDatabase } from '../support/test-app';
import { QueenClient } from './queen-client';

/**
 * Queen's client tests retentionTest and retentionTestMaxTime, run as its suite asks: RETENTION_INTERVAL 2000. On
 * PostgreSQL in a database of their own: in the shared one the job also works through every other file's due
 * partitions, which on a loaded machine can take longer than the 15 s these tests give it.
 */
describe("Queen's retention tests", () => {
  const broker = {} as { app: NestExpressApplication };
  let scratch: ScratchDatabase | undefined;

  beforeAll(async () => {
    scratch = onEmbeddedDatabase ? undefined : await ScratchDatabase.create('leasehold_queen_retention');
    broker.app = await createTestApp({
      RETENTION_INTERVAL_MS: '2000',
      ...(scratch ? { DATABASE_URL: scratch.url } : {}),
    });
  });

  afterAll(async () => {
    await broker.app?.close();
    await scratch?.drop();
  });

  it('retentionTest: 100 unconsumed messages of a queue with retentionSeconds 10 are gone 15 s later', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    const queue = await queen.create('test-queue-retention-01', {
      retentionEnabled: true,
      retentionSeconds: 10,
      completedRetentionSeconds: 5,
    });
    expect(queue.configured).toBe(true);
    for (let index = 0; index < 100; index += 1)
      expect(await queen.push('test-queue-retention-01', { data: { message: index } })).toBe(201);

    await sleep(15_000);

    expect(await queen.pop('test-queue-retention-01', 100)).toEqual([]);
  });

  it('retentionTestMaxTime: with maxWaitTimeSeconds 10 they are gone 15 s later too', async () => {
    const queen = new QueenClient(broker.app, newTenant());
    const queue = await queen.create('test-queue-retention-02', { retentionEnabled: true, maxWaitTimeSeconds: 10 });
    expect(queue.configured).toBe(true);
    for (let index = 0; index < 100; index += 1)
      expect(await queen.push('test-queue-retention-02', { data: { message: index } })).toBe(201);

    await sleep(15_000);

    expect(await queen.pop('test-queue-retention-02', 100)).toEqual([]);
  });
});
