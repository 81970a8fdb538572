import { Logger } from '@nestjs/common';
import { compositeKey } from '../common/composite-key';
import { HistoryRecorder } from '../history/history-recorder';
import { MetricsService } from '../metrics/metrics.service';
import { Redelivery } from '../wakeup/parked-polls';
import { Statement } from '../database/statement';
import { OpenTransaction } from '../database/transaction-runner';
import type { Session } from '../database/database';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { AckCommand } from './dto/ack-request.dto';
import { AckRepository, Cursor, CursorKey, CursorUpdate, DeadLetter } from './ack.repository';
import { AckService, INVALID_LEASE } from './ack.service';
import { HandedOutLeases } from './handed-out-leases';
import type { WakeupChannel } from '../wakeup/wakeup-channel';
import { TransactionKey } from '../message/message-shape';

const P1 = '0198f2c1-0000-7000-8000-000000000001';
const P2 = '0198f2c1-0000-7000-8000-000000000002';
const LEASE = '0198f2c1-0000-7000-8000-00000000aaaa';
const OTHER_LEASE = '0198f2c1-0000-7000-8000-00000000bbbb';
const GROUP = 'workers';

/** A statement whose answer the test gives, whatever rows it gets. */
const answering = <T>(answer: () => T): Statement<T> => ({ text: '', values: [], parse: answer });
/** Runs every statement on no database: each gets no rows. */
const noDatabase: OpenTransaction = {
  rows: async () => [],
  rowsTogether: async (statements) => statements.map(() => []),
  commitWith: async () => [],
};

/**
 * Partition P1 of queue `jobs` holds messages m1..m10; the group has committed
 * m2 and holds a live lease (epoch 4) on m3..m5.
 */
function cursor(overrides: Partial<Cursor> = {}): Cursor {
  return {
    partitionId: P1,
    consumerGroup: GROUP,
    queue: 'jobs',
    partition: 'Default',
    lastOffset: 10,
    retryLimit: 3,
    deadLetterQueue: true,
    retryDelayMs: 0,
    committedOffset: 2,
    nextOffset: 3,
    deliveredOffset: 5,
    leaseEndOffset: 5,
    leaseId: LEASE,
    leaseLive: true,
    leaseEpoch: 4,
    retryCount: 0,
    ...overrides,
  };
}

/** An ack of message m<seq> in P1 by the lease holder. */
function ack(seq: number, overrides: Partial<AckCommand> = {}): AckCommand {
  return {
    transactionId: `m${seq}`,
    partitionId: P1,
    outcome: 'completed',
    consumerGroup: GROUP,
    leaseId: LEASE,
    error: null,
    ...overrides,
  };
}

interface World {
  /** Consumer rows that exist (the lock finds them). */
  cursors?: Cursor[];
  /** Partitions that exist, whether or not the group has a row in them. */
  partitions?: string[];
  /** Highest stored seq per partition: m1..m<n> exist there. */
  messages?: Record<string, number>;
}

/** A saved update as the tests compare it; where it stood before and its retry delay are checked on their own. */
type SavedCursor = Omit<CursorUpdate, 'committedBefore' | 'retryAfterMs'>;

interface Harness {
  service: AckService;
  saved: SavedCursor[][];
  /** Where each saved cursor stood when locked, as the lag counter reads it. */
  before: number[];
  /** The retry delay each saved cursor starts (0: none). */
  retryAfter: number[];
  letters: DeadLetter[][];
  announced: Redelivery[][];
  lockedKeys: CursorKey[][];
  counted: Array<{ metric: string; labels: Record<string, string>; value: number }>;
}

function harness(world: World = {}): Harness {
  const rows = world.cursors ?? [cursor()];
  const partitions = new Set(world.partitions ?? rows.map((row) => row.partitionId));
  const messages = world.messages ?? { [P1]: 10, [P2]: 10 };
  const saved: SavedCursor[][] = [];
  const before: number[] = [];
  const retryAfter: number[] = [];
  const letters: DeadLetter[][] = [];
  const announced: Redelivery[][] = [];
  const lockedKeys: CursorKey[][] = [];
  const counted: Harness['counted'] = [];

  // Kept as the repository reads them: the service hands over its working cursors whole.
  const save = (updates: CursorUpdate[]) => {
    before.push(...updates.map((update) => update.committedBefore));
    retryAfter.push(...updates.map((update) => update.retryAfterMs));
    saved.push(
      updates.map(({ partitionId, consumerGroup, committedOffset, retryCount, releaseLease }) => ({
        partitionId,
        consumerGroup,
        committedOffset,
        retryCount,
        releaseLease,
      })),
    );
  };

  const writes = {
    run: async (tenantId: string, work: (unit: UnitOfWork) => Promise<unknown>) => {
      const unit = new UnitOfWork(tenantId, {} as Session, noDatabase);
      const result = await work(unit);
      announced.push(unit.redelivered);
      unit.runEffects(new Logger('test'));
      return result;
    },
  } as unknown as Writes;
  const acks = {
    lockCursors: (_tenantId: string, keys: CursorKey[]) =>
      answering(() => {
        lockedKeys.push(keys.map(({ partitionId, consumerGroup }) => ({ partitionId, consumerGroup })));
        return rows
          .filter((row) =>
            keys.some((key) => key.partitionId === row.partitionId && key.consumerGroup === row.consumerGroup),
          )
          .map((row) => ({ ...row }));
      }),
    offsets: (_tenantId: string, named: TransactionKey[]) =>
      answering(() => {
        const offsets = new Map<string, number>();
        for (const { partitionId, transactionId } of named) {
          const seq = Number(/^m(\d+)$/.exec(transactionId)?.[1]);
          if (partitions.has(partitionId) && seq >= 1 && seq <= (messages[partitionId] ?? 0)) {
            offsets.set(compositeKey(partitionId, transactionId), seq);
          }
        }
        return offsets;
      }),
    existingPartitions: (_tenantId: string, ids: string[]) =>
      answering(() => new Set(ids.filter((id) => partitions.has(id)))),
    saveCursors: (_tenantId: string, updates: CursorUpdate[]) => {
      // Recorded when built: an ack's own unit hands it to lastly, which this fake never commits.
      save(updates);
      return answering(() => undefined);
    },
    deadLetter: (_tenantId: string, batch: DeadLetter[]) =>
      answering(() => {
        letters.push(batch);
        return { bytes: 2 * batch.length, messages: batch.length };
      }),
  } as unknown as AckRepository;
  const counter = (metric: string) => ({
    inc: (labels: Record<string, string>, value = 1) => void counted.push({ metric, labels, value }),
  });
  const metrics = {
    acks: counter('acks'),
    ackPaths: { inc: () => undefined },
    redeliveredMessages: counter('redelivered'),
    deadLettered: counter('deadLettered'),
    queue: (_tenantId: string, queue: string) => ({ queue }),
  } as unknown as MetricsService;

  const history = {
    acked: (_tenantId: string, queue: string, value: number) =>
      void counted.push({ metric: 'history.acked', labels: { queue }, value }),
    deadLettered: (_tenantId: string, queue: string, value: number) =>
      void counted.push({ metric: 'history.deadLettered', labels: { queue }, value }),
  } as unknown as HistoryRecorder;

  const service = new AckService(writes, acks, metrics, history, new HandedOutLeases(), {} as WakeupChannel);
  return { service, saved, before, retryAfter, letters, announced, lockedKeys, counted };
}

const refused = (error: string) => ({ success: false, error, leaseReleased: false, dlq: false });
const accepted = (leaseReleased: boolean, dlq = false) => ({ success: true, error: null, leaseReleased, dlq });

/** What saveCursors received for P1 / GROUP, if anything. */
const savedFor = (h: Harness, partitionId = P1) =>
  h.saved.flat().find((update) => update.partitionId === partitionId && update.consumerGroup === GROUP);

describe('AckService.acknowledge', () => {
  it('answers an empty request with no results and opens no transaction', async () => {
    const h = harness();
    const run = jest.spyOn(h.service['writes'], 'run');

    await expect(h.service.acknowledge('t', [])).resolves.toEqual([]);
    expect(run).not.toHaveBeenCalled();
  });

  it('saves each cursor with where it stood when locked, though the acks moved it on', async () => {
    const h = harness();

    await h.service.acknowledge('t', [ack(3), ack(4), ack(5)]);

    expect(savedFor(h)?.committedOffset).toBe(5);
    expect(h.before).toEqual([2]);
  });

  it('reports index and transactionId of each ack in request order', async () => {
    const h = harness();

    const results = await h.service.acknowledge('t', [ack(3), ack(99)]);

    expect(results.map(({ index, transactionId }) => [index, transactionId])).toEqual([
      [0, 'm3'],
      [1, 'm99'],
    ]);
  });

  describe('what an ack is checked against', () => {
    it('refuses "partition not found" when the partition does not exist', async () => {
      const h = harness({ cursors: [], partitions: [] });

      const [result] = await h.service.acknowledge('t', [ack(3)]);

      expect(result).toMatchObject(refused('partition not found'));
      expect(h.saved).toEqual([]);
    });

    it('refuses "message not found in this partition" for an unknown transactionId', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(11)]);

      expect(result).toMatchObject(refused('message not found in this partition'));
      expect(h.saved).toEqual([]);
    });

    it('refuses "message not found" before any lease check when the group has no row in an existing partition', async () => {
      const h = harness({ cursors: [], partitions: [P1], messages: { [P1]: 2 } });

      const [result] = await h.service.acknowledge('t', [ack(3)]);

      expect(result).toMatchObject(refused('message not found in this partition'));
    });

    it('locks each (partition, group) once however many acks name it', async () => {
      const h = harness();

      await h.service.acknowledge('t', [ack(3), ack(4), ack(5, { consumerGroup: 'other' })]);

      expect(h.lockedKeys).toEqual([
        [
          { partitionId: P1, consumerGroup: GROUP },
          { partitionId: P1, consumerGroup: 'other' },
        ],
      ]);
    });
  });

  describe('with a leaseId', () => {
    it('accepts the live holder', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3)]);

      expect(result).toMatchObject(accepted(false));
      expect(savedFor(h)).toMatchObject({ committedOffset: 3 });
    });

    it('refuses "invalid or expired lease" for the right leaseId once the lease has expired', async () => {
      const h = harness({ cursors: [cursor({ leaseLive: false })] });

      const [result] = await h.service.acknowledge('t', [ack(3)]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
      expect(h.saved).toEqual([]);
    });

    it('refuses "invalid or expired lease" for another lease\'s id while a lease is live', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseId: OTHER_LEASE })]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
      expect(h.saved).toEqual([]);
    });

    it('refuses "invalid or expired lease" when the group has no row in the partition', async () => {
      const h = harness({ cursors: [], partitions: [P1] });

      const [result] = await h.service.acknowledge('t', [ack(3)]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
    });

    it('refuses "message is not in the batch of this lease" past the lease end, and accepts its last message', async () => {
      const h = harness();

      const results = await h.service.acknowledge('t', [ack(6), ack(5)]);

      expect(results[0]).toMatchObject(refused('message is not in the batch of this lease'));
      expect(results[1]).toMatchObject(accepted(true));
    });
  });

  describe('with a leaseEpoch (fencing)', () => {
    it('refuses "invalid or expired lease" for an earlier epoch even with the live leaseId', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 3 })]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
      expect(h.saved).toEqual([]);
    });

    it('refuses a later epoch than the latest claim', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 5 })]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
    });

    it('refuses any epoch when the group has no row in the partition, even without a leaseId', async () => {
      const h = harness({ cursors: [], partitions: [P1] });

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 1, leaseId: undefined })]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
    });

    it('accepts the current epoch with the live leaseId', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 4 })]);

      expect(result).toMatchObject(accepted(false));
      expect(savedFor(h)).toMatchObject({ committedOffset: 3 });
    });

    it('accepts the current epoch without a leaseId, for a delivered message', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 4, leaseId: undefined })]);

      expect(result).toMatchObject(accepted(false));
      expect(savedFor(h)).toMatchObject({ committedOffset: 3 });
    });

    it('still applies the lease checks after a matching epoch: a stale leaseId is refused', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { leaseEpoch: 4, leaseId: OTHER_LEASE })]);

      expect(result).toMatchObject(refused(INVALID_LEASE));
    });
  });

  describe('without a leaseId', () => {
    it("accepts a delivered message, even under another worker's live lease, without ending that lease", async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(4, { leaseId: undefined })]);

      expect(result).toMatchObject(accepted(false));
      expect(savedFor(h)).toEqual({
        partitionId: P1,
        consumerGroup: GROUP,
        committedOffset: 4,
        retryCount: 0,
        releaseLease: false,
      });
    });

    it('refuses "message has not been delivered to this consumer group" past the delivered offset', async () => {
      const h = harness({ cursors: [cursor({ leaseId: null, leaseEndOffset: null, leaseLive: false })] });

      const [result] = await h.service.acknowledge('t', [ack(6, { leaseId: undefined })]);

      expect(result).toMatchObject(refused('message has not been delivered to this consumer group'));
      expect(h.saved).toEqual([]);
    });

    it('refuses "has not been delivered" when the group has no row in the partition', async () => {
      const h = harness({ cursors: [], partitions: [P1] });

      const [result] = await h.service.acknowledge('t', [ack(1, { leaseId: undefined })]);

      expect(result).toMatchObject(refused('message has not been delivered to this consumer group'));
    });

    it('clears an expired lease whose span it completes, reporting no live lease ended', async () => {
      const h = harness({ cursors: [cursor({ leaseLive: false })] });

      const [result] = await h.service.acknowledge('t', [ack(5, { leaseId: undefined })]);

      expect(result).toMatchObject(accepted(false));
      expect(savedFor(h)).toMatchObject({ committedOffset: 5, releaseLease: true });
    });
  });

  describe('completed', () => {
    it('moves the cursor to the message and resets the retry count, keeping the lease mid-batch', async () => {
      const h = harness({ cursors: [cursor({ retryCount: 2 })] });

      const [result] = await h.service.acknowledge('t', [ack(4)]);

      expect(result).toMatchObject(accepted(false));
      expect(h.saved).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 4, retryCount: 0, releaseLease: false }],
      ]);
    });

    it('never moves the cursor backwards: a lower ack after a higher one keeps the higher', async () => {
      const h = harness();

      const results = await h.service.acknowledge('t', [ack(4), ack(3)]);

      expect(results.map((result) => result.success)).toEqual([true, true]);
      expect(savedFor(h)).toMatchObject({ committedOffset: 4 });
    });

    it('accepts an already committed message again and saves nothing', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(2)]);

      expect(result).toMatchObject(accepted(false));
      expect(h.saved).toEqual([]);
    });

    it('releases the lease when the last message of its span is completed, and only that ack reports it', async () => {
      const h = harness();

      const results = await h.service.acknowledge('t', [ack(3), ack(4), ack(5)]);

      expect(results.map((result) => result.leaseReleased)).toEqual([false, false, true]);
      expect(h.saved).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 5, retryCount: 0, releaseLease: true }],
      ]);
    });

    it('with releaseLease, ends the lease mid-batch, and only with the leaseId it names', async () => {
      const h = harness();
      const unleased = harness();

      const [result] = await h.service.acknowledge('t', [ack(3, { releaseLease: true })]);
      const [without] = await unleased.service.acknowledge('t', [ack(3, { releaseLease: true, leaseId: undefined })]);

      expect(result).toMatchObject(accepted(true));
      expect(savedFor(h)).toMatchObject({ committedOffset: 3, releaseLease: true });
      expect(without).toMatchObject(accepted(false));
      expect(savedFor(unleased)).toMatchObject({ committedOffset: 3, releaseLease: false });
    });

    it('wakes the group for the messages past the cursor once a released lease leaves some', async () => {
      const h = harness();

      await h.service.acknowledge('t', [ack(5)]);

      expect(h.announced).toEqual([[{ queue: 'jobs', consumerGroup: GROUP, partitions: new Map([['Default', 5]]) }]]);
    });
  });

  describe('retry', () => {
    it('hands the batch back: releases the lease, keeps the cursor and the retry count', async () => {
      const h = harness({ cursors: [cursor({ retryCount: 1 })] });

      const [result] = await h.service.acknowledge('t', [ack(4, { outcome: 'retry' })]);

      expect(result).toMatchObject(accepted(true));
      expect(h.saved).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 2, retryCount: 1, releaseLease: true }],
      ]);
      expect(h.letters).toEqual([]);
      expect(h.counted).toContainEqual({ metric: 'redelivered', labels: { queue: 'jobs', cause: 'retry' }, value: 3 });
    });

    it('leaves the rest of the batch unackable by the old lease once handed back', async () => {
      const h = harness();

      const results = await h.service.acknowledge('t', [ack(3, { outcome: 'retry' }), ack(4)]);

      expect(results[0]).toMatchObject(accepted(true));
      expect(results[1]).toMatchObject(refused(INVALID_LEASE));
      expect(savedFor(h)).toMatchObject({ committedOffset: 2, releaseLease: true });
    });
  });

  describe('failed', () => {
    it('spends one retry, releases the lease and keeps the cursor', async () => {
      const h = harness({ cursors: [cursor({ retryCount: 1 })] });

      const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'failed', error: 'boom' })]);

      expect(result).toMatchObject(accepted(true));
      expect(h.saved).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 2, retryCount: 2, releaseLease: true }],
      ]);
      expect(h.letters).toEqual([]);
      expect(h.counted).toContainEqual({ metric: 'redelivered', labels: { queue: 'jobs', cause: 'nack' }, value: 3 });
    });

    it('counts one retry per request per partition however many of its messages fail', async () => {
      const h = harness();
      const unleased = { leaseId: undefined, outcome: 'failed' as const };

      const results = await h.service.acknowledge('t', [ack(3, unleased), ack(4, unleased), ack(5, unleased)]);

      expect(results.every((result) => result.success)).toBe(true);
      expect(savedFor(h)).toMatchObject({ retryCount: 1 });
    });

    it('counts one retry in each partition a request fails messages in', async () => {
      const h = harness({ cursors: [cursor(), cursor({ partitionId: P2, retryCount: 1 })] });

      await h.service.acknowledge('t', [ack(3, { outcome: 'failed' }), ack(4, { outcome: 'failed', partitionId: P2 })]);

      expect(savedFor(h, P1)).toMatchObject({ retryCount: 1, releaseLease: true });
      expect(savedFor(h, P2)).toMatchObject({ retryCount: 2, releaseLease: true });
    });

    it('refuses "message already acknowledged" for a committed message, whatever the failure', async () => {
      const h = harness({ cursors: [cursor({ leaseId: null, leaseEndOffset: null, leaseLive: false })] });
      const unleased = { leaseId: undefined };

      const results = await h.service.acknowledge('t', [
        ack(2, { ...unleased, outcome: 'failed' }),
        ack(1, { ...unleased, outcome: 'retry' }),
        ack(2, { ...unleased, outcome: 'dlq' }),
      ]);

      expect(results).toMatchObject(Array(3).fill(refused('message already acknowledged')));
      expect(h.saved).toEqual([]);
      expect(h.letters).toEqual([]);
    });

    describe('with the retry limit spent', () => {
      it('dead-letters the message at the cursor and moves past it when the queue keeps dead letters', async () => {
        const h = harness({ cursors: [cursor({ retryCount: 3, retryLimit: 3 })] });

        const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'failed', error: 'boom' })]);

        expect(result).toMatchObject(accepted(true, true));
        expect(h.letters).toEqual([
          [{ partitionId: P1, consumerGroup: GROUP, seq: 3, errorMessage: 'boom', retryCount: 3 }],
        ]);
        expect(h.saved).toEqual([
          [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 3, retryCount: 0, releaseLease: true }],
        ]);
        expect(h.counted).toContainEqual({ metric: 'deadLettered', labels: { queue: 'jobs' }, value: 1 });
        expect(h.counted).toContainEqual({ metric: 'history.deadLettered', labels: { queue: 'jobs' }, value: 1 });
      });

      it('drops the message at the cursor without a dead letter when the queue keeps none', async () => {
        const h = harness({ cursors: [cursor({ retryCount: 3, retryLimit: 3, deadLetterQueue: false })] });

        const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'failed', error: 'boom' })]);

        expect(result).toMatchObject(accepted(true, false));
        expect(h.letters).toEqual([]);
        expect(savedFor(h)).toEqual({
          partitionId: P1,
          consumerGroup: GROUP,
          committedOffset: 3,
          retryCount: 0,
          releaseLease: true,
        });
      });

      it('takes the first message kept past the cursor as the one at the cursor when retention deleted the ones between', async () => {
        const h = harness({ cursors: [cursor({ retryCount: 3, retryLimit: 3, nextOffset: 4 })] });

        const [result] = await h.service.acknowledge('t', [ack(4, { outcome: 'failed', error: 'boom' })]);

        expect(result).toMatchObject(accepted(true, true));
        expect(savedFor(h)).toMatchObject({ committedOffset: 4, retryCount: 0 });
      });

      it('only spends another retry for a message not at the cursor', async () => {
        const h = harness({ cursors: [cursor({ retryCount: 3, retryLimit: 3 })] });

        const [result] = await h.service.acknowledge('t', [ack(4, { outcome: 'failed' })]);

        expect(result).toMatchObject(accepted(true, false));
        expect(h.letters).toEqual([]);
        expect(savedFor(h)).toMatchObject({ committedOffset: 2, retryCount: 4 });
      });

      it('still spends a retry at the cursor while the count is below the limit', async () => {
        const h = harness({ cursors: [cursor({ retryCount: 2, retryLimit: 3 })] });

        const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'failed' })]);

        expect(result).toMatchObject(accepted(true, false));
        expect(savedFor(h)).toMatchObject({ committedOffset: 2, retryCount: 3 });
      });
    });
  });

  describe("with the queue's retryDelay", () => {
    const delayed = (overrides: Partial<Cursor> = {}) => cursor({ retryDelayMs: 1500, ...overrides });

    it('holds back what a retry hands back for the delay', async () => {
      const h = harness({ cursors: [delayed()] });

      await h.service.acknowledge('t', [ack(3, { outcome: 'retry' })]);

      expect(h.retryAfter).toEqual([1500]);
    });

    it('holds back what a failure hands back for the delay, with its retry spent', async () => {
      const h = harness({ cursors: [delayed()] });

      await h.service.acknowledge('t', [ack(3, { outcome: 'failed' })]);

      expect(savedFor(h)).toMatchObject({ retryCount: 1, releaseLease: true });
      expect(h.retryAfter).toEqual([1500]);
    });

    it('does not hold back what follows a message that left as a dead letter', async () => {
      const h = harness({ cursors: [delayed({ retryCount: 3, retryLimit: 3 })] });

      const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'failed' })]);

      expect(result).toMatchObject(accepted(true, true));
      expect(h.retryAfter).toEqual([0]);
    });

    it('does not hold back a completed batch, nor anything when the queue has no delay', async () => {
      const withDelay = harness({ cursors: [delayed()] });
      await withDelay.service.acknowledge('t', [ack(3), ack(4), ack(5)]);
      const without = harness();
      await without.service.acknowledge('t', [ack(3, { outcome: 'failed' })]);

      expect(withDelay.retryAfter).toEqual([0]);
      expect(without.retryAfter).toEqual([0]);
    });
  });

  describe('dlq', () => {
    it('dead-letters the message at the cursor at once, with its error and retry count, and moves past it', async () => {
      const h = harness({ cursors: [cursor({ retryCount: 1, deadLetterQueue: false })] });

      const [result] = await h.service.acknowledge('t', [ack(3, { outcome: 'dlq', error: 'poison' })]);

      expect(result).toMatchObject(accepted(true, true));
      expect(h.letters).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, seq: 3, errorMessage: 'poison', retryCount: 1 }],
      ]);
      expect(h.saved).toEqual([
        [{ partitionId: P1, consumerGroup: GROUP, committedOffset: 3, retryCount: 0, releaseLease: true }],
      ]);
    });

    it('treats a message past the cursor as a failure: no dead letter, one retry spent, cursor kept', async () => {
      const h = harness();

      const [result] = await h.service.acknowledge('t', [ack(4, { outcome: 'dlq', error: 'poison' })]);

      expect(result).toMatchObject(accepted(true, false));
      expect(h.letters).toEqual([]);
      expect(savedFor(h)).toMatchObject({ committedOffset: 2, retryCount: 1, releaseLease: true });
    });

    it('dead-letters consecutive messages from the cursor in one request', async () => {
      const h = harness({ cursors: [cursor({ leaseId: null, leaseEndOffset: null, leaseLive: false })] });
      const unleased = { leaseId: undefined, outcome: 'dlq' as const };

      const results = await h.service.acknowledge('t', [ack(3, unleased), ack(4, unleased)]);

      expect(results.map((result) => result.dlq)).toEqual([true, true]);
      expect(h.letters[0].map((letter) => letter.seq)).toEqual([3, 4]);
      expect(savedFor(h)).toMatchObject({ committedOffset: 4, releaseLease: false });
    });
  });

  it('counts each ack as accepted or refused by its status once committed', async () => {
    const h = harness();

    await h.service.acknowledge('t', [ack(3), ack(99, { outcome: 'failed' })]);

    expect(h.counted.filter((entry) => entry.metric === 'acks')).toEqual([
      { metric: 'acks', labels: { status: 'completed', outcome: 'accepted' }, value: 1 },
      { metric: 'acks', labels: { status: 'failed', outcome: 'refused' }, value: 1 },
    ]);
  });

  it("adds the accepted completed acks to each queue's history once committed, and no refused one", async () => {
    const h = harness();

    await h.service.acknowledge('t', [ack(3), ack(99), ack(2, { outcome: 'failed' })]);

    expect(h.counted.filter((entry) => entry.metric.startsWith('history.'))).toEqual([
      { metric: 'history.acked', labels: { queue: 'jobs' }, value: 1 },
    ]);
  });
});
