import { MaintenanceRepository } from '../maintenance/maintenance.repository';
import { MaintenanceService } from '../maintenance/maintenance.service';
import { OpenTransaction, TransactionRunner } from '../database/transaction-runner';
import { Statement } from '../database/statement';
import { DatabaseEngine } from '../database/database-engine';
import type { AppConfig } from '../config/app-config';
import type { EncryptionKeysRepository } from '../encryption/encryption-keys.repository';
import { PayloadCipher } from '../encryption/payload-cipher';
import type { TenantQuotas } from '../limits/tenant-quotas';
import { ConflictException, Logger } from '@nestjs/common';
import { compositeKey } from '../common/composite-key';
import { HistoryRecorder } from '../history/history-recorder';
import { MetricsService } from '../metrics/metrics.service';
import { QueueWork } from '../wakeup/parked-polls';
import type { Session } from '../database/database';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { PushItem } from './dto/push-request.dto';
import { NewMessage, PushRepository } from './push.repository';
import { PushService } from './push.service';
import { TransactionKey, NamedTransactionKey } from '../message/message-shape';

interface Insert {
  producerSub: string | null;
  messages: NewMessage[];
  lastOffsets: Map<string, number>;
}

type InsertStatement = { insert: Insert };

/** A statement whose answer the test gives, whatever rows it gets. */
const answering = <T>(answer: () => T): Statement<T> => ({ text: '', values: [], parse: answer });
/** Runs every statement on no database: each gets no rows. */
const noDatabase: OpenTransaction = {
  rows: async () => [],
  rowsTogether: async (statements) => statements.map(() => []),
  commitWith: async () => [],
};

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface StoredPartition {
  queue: string;
  name: string;
  lastOffset: number;
  /** transactionId -> message id already stored there. */
  messages?: Record<string, string>;
}

interface Harness {
  service: PushService;
  /** Each insert sent: the new messages and the last offsets it moves the partitions to. */
  inserts: Insert[];
  lockedPartitions: Array<Array<{ queueId: string; name: string }>>;
  /** Lookups of a push's queues to create what it named (lockNamed found something missing). */
  creating: number;
  announced: Array<Map<string, QueueWork>>;
  notified: number;
  pushedCounts: Array<{ queue: string; value: number }>;
  historyCounts: Array<{ queue: string; value: number }>;
  /** What each unit of work recorded as stored, for the storage quotas. */
  stored: Array<UnitOfWork['storedChange']>;
  /** The id the fake gives a partition: `<queue>/<name>`. */
  partitionId: (queue: string, name: string) => string;
}

/**
 * A tenant whose queues and partitions the fake repositories create on first
 * use, as the real ones do; `stored` sets the partitions that already hold
 * messages. `vanished` names queues deleted before ensureQueues could lock them.
 */
function harness(stored: StoredPartition[] = [], vanished: string[] = []): Harness {
  const partitionId = (queue: string, name: string) => `${queue}/${name}`;
  const queueId = (queue: string) => `queue:${queue}`;
  const offsets = new Map(stored.map((p) => [partitionId(p.queue, p.name), p.lastOffset]));
  const existing = new Map<string, string>();
  for (const p of stored) {
    for (const [transactionId, id] of Object.entries(p.messages ?? {})) {
      existing.set(compositeKey(partitionId(p.queue, p.name), transactionId), id);
    }
  }
  const h: Omit<Harness, 'service'> = {
    inserts: [],
    lockedPartitions: [],
    creating: 0,
    announced: [],
    notified: 0,
    pushedCounts: [],
    historyCounts: [],
    stored: [],
    partitionId,
  };

  const lockNamed = (named: Map<string, Map<string, unknown>>) => {
    const wanted = [...named].flatMap(([queue, partitions]) => [...partitions.keys()].map((name) => ({ queue, name })));
    if (wanted.some(({ queue, name }) => vanished.includes(queue) || !offsets.has(partitionId(queue, name)))) {
      return undefined;
    }
    h.lockedPartitions.push(wanted.map(({ queue, name }) => ({ queueId: queueId(queue), name })));
    return {
      ids: new Map([...named.keys()].map((queue) => [queue, queueId(queue)])),
      maxSizes: new Map(),
      encrypted: new Set(),
      locked: wanted.map(({ queue, name }) => ({
        id: partitionId(queue, name),
        queueId: queueId(queue),
        name,
        lastOffset: offsets.get(partitionId(queue, name))!,
      })),
    };
  };
  const found = (keys: TransactionKey[]) =>
    new Map(
      keys
        .map((key) => compositeKey(key.partitionId, key.transactionId))
        .filter((key) => existing.has(key))
        .map((key) => [key, existing.get(key)!]),
    );
  const pushes = {
    // The fake lock decides from the names alone.
    lockNamed: (_tenantId: string, named: Map<string, Map<string, unknown>>) => answering(() => lockNamed(named)),
    lockQueues: (_tenantId: string, names: string[]) =>
      answering(() => {
        h.creating += 1;
        return {
          ids: new Map(names.filter((name) => !vanished.includes(name)).map((name) => [name, queueId(name)])),
          maxSizes: new Map(),
          encrypted: new Set(),
        };
      }),
    createQueues: () => answering(() => 0),
    lockPartitions: (_tenantId: string, wanted: Array<{ queueId: string; name: string }>) =>
      answering(() => {
        h.lockedPartitions.push(wanted);
        return wanted.map((partition) => {
          const queue = partition.queueId.slice('queue:'.length);
          const id = partitionId(queue, partition.name);
          return { id, queueId: partition.queueId, name: partition.name, lastOffset: offsets.get(id) ?? 0 };
        });
      }),
    createPartitions: () => answering(() => 0),
    findExisting: (_tenantId: string, keys: TransactionKey[]) => answering(() => found(keys)),
    findExistingByName: (_tenantId: string, keys: NamedTransactionKey[]) =>
      answering(() => found(keys.map((key) => ({ ...key, partitionId: partitionId(key.queue, key.partition) })))),
    store: (
      _tenantId: string,
      producerSub: string | null,
      messages: NewMessage[],
      lastOffsets: Map<string, number>,
    ) => {
      const insert = { producerSub, messages, lastOffsets: new Map(lastOffsets) };
      return { ...answering(() => void h.inserts.push(insert)), insert };
    },
  } as unknown as PushRepository;
  // As Writes does: other processes are told inside the transaction when something was pushed, this
  // process's polls after commit, then the effects run.
  const writes = {
    run: async (tenantId: string, work: (unit: UnitOfWork) => Promise<unknown>) => {
      const unit = new UnitOfWork(tenantId, {} as Session, noDatabase);
      const result = await work(unit);
      // The runner sends the unit's last statement with the COMMIT.
      const last = unit.lastStatement;
      const statement = (typeof last === 'function' ? last(undefined) : last) as InsertStatement | undefined;
      if (statement) h.inserts.push(statement.insert);
      h.stored.push(unit.storedChange);
      if (unit.pushed.size > 0) h.notified += 1;
      h.announced.push(unit.pushed);
      unit.runEffects(new Logger('test'));
      return result;
    },
  } as unknown as Writes;
  const metrics = {
    pushedMessages: {
      inc: (labels: { queue: string }, value: number) => void h.pushedCounts.push({ queue: labels.queue, value }),
    },
    queue: (_tenantId: string, queue: string) => ({ queue }),
  } as unknown as MetricsService;

  const quotas = { admit: async () => undefined, assertRoomToStore: () => undefined } as unknown as TenantQuotas;

  return Object.assign(h, {
    service: new PushService(
      writes,
      pushes,
      metrics,
      quotas,
      new MaintenanceService({} as TransactionRunner, {} as DatabaseEngine, new MaintenanceRepository()),
      new PayloadCipher({ encryptionKeys: [] } as unknown as AppConfig),
      {} as EncryptionKeysRepository,
      {
        pushed: (_tenantId: string, queue: string, value: number) => void h.historyCounts.push({ queue, value }),
      } as unknown as HistoryRecorder,
    ),
  });
}

function item(queue: string, partition: string, transactionId?: string, payload: unknown = {}): PushItem {
  return { queue, partition, payloadJson: JSON.stringify(payload), transactionId, traceId: undefined };
}

/** [partitionId, seq, transactionId] of every inserted message, in insert order. */
const insertedOffsets = (h: Harness) =>
  h.inserts.flatMap(({ messages }) =>
    messages.map((message) => [message.partitionId, message.seq, message.transactionId]),
  );

describe('PushService.push', () => {
  it('looks up only the transactionIds producers chose: a minted one cannot be stored yet', async () => {
    const h = harness([
      { queue: 'orders', name: 'a', lastOffset: 0 },
      { queue: 'orders', name: 'b', lastOffset: 0 },
    ]);
    const withLock = jest.spyOn(h.service['pushes'], 'findExistingByName');
    const afterLock = jest.spyOn(h.service['pushes'], 'findExisting');

    await h.service.push('t', undefined, [item('orders', 'a'), item('orders', 'b')]);
    expect(withLock).not.toHaveBeenCalled();

    await h.service.push('t', undefined, [item('orders', 'a'), item('orders', 'a', 'chosen-1')]);
    expect(withLock).toHaveBeenCalledTimes(1);
    expect(withLock.mock.calls[0][1]).toEqual([{ queue: 'orders', partition: 'a', transactionId: 'chosen-1' }]);
    expect(afterLock).not.toHaveBeenCalled();
    expect(h.inserts.flatMap(({ messages }) => messages)).toHaveLength(4);
  });

  it('checks chosen transactionIds after creating what was missing, the check by name having found no partition', async () => {
    const h = harness([{ queue: 'orders', name: 'a', lastOffset: 0 }]);
    const afterLock = jest.spyOn(h.service['pushes'], 'findExisting');

    await h.service.push('t', undefined, [item('orders', 'a', 'chosen-1'), item('brand-new', 'x', 'chosen-2')]);

    expect(afterLock).toHaveBeenCalledTimes(1);
    expect(afterLock.mock.calls[0][1].map((key) => key.transactionId)).toEqual(['chosen-1', 'chosen-2']);
  });

  it('stores nothing and opens no transaction for an empty push', async () => {
    const h = harness();
    const run = jest.spyOn(h.service['writes'], 'run');

    await expect(h.service.push('t', undefined, [])).resolves.toEqual([]);
    expect(run).not.toHaveBeenCalled();
    expect(h.inserts).toEqual([]);
  });

  describe('offsets', () => {
    it('numbers a new partition from 1, one by one in request order', async () => {
      const h = harness();

      await h.service.push('t', 'producer', [item('q', 'p', 'a'), item('q', 'p', 'b'), item('q', 'p', 'c')]);

      expect(insertedOffsets(h)).toEqual([
        ['q/p', 1, 'a'],
        ['q/p', 2, 'b'],
        ['q/p', 3, 'c'],
      ]);
      expect(h.inserts[0].lastOffsets).toEqual(new Map([['q/p', 3]]));
    });

    it("continues from the partition's stored last offset", async () => {
      const h = harness([{ queue: 'q', name: 'p', lastOffset: 41 }]);

      await h.service.push('t', undefined, [item('q', 'p', 'a'), item('q', 'p', 'b')]);

      expect(insertedOffsets(h)).toEqual([
        ['q/p', 42, 'a'],
        ['q/p', 43, 'b'],
      ]);
      expect(h.inserts[0].lastOffsets).toEqual(new Map([['q/p', 43]]));
    });

    it('keeps a sequence per partition when a request interleaves several', async () => {
      const h = harness([{ queue: 'q', name: 'eu', lastOffset: 10 }]);

      await h.service.push('t', undefined, [
        item('q', 'eu', 'a'),
        item('q', 'us', 'b'),
        item('q', 'eu', 'c'),
        item('q', 'us', 'd'),
        item('q', 'eu', 'e'),
      ]);

      expect(insertedOffsets(h)).toEqual([
        ['q/eu', 11, 'a'],
        ['q/us', 1, 'b'],
        ['q/eu', 12, 'c'],
        ['q/us', 2, 'd'],
        ['q/eu', 13, 'e'],
      ]);
      expect(h.inserts[0].lastOffsets).toEqual(
        new Map([
          ['q/eu', 13],
          ['q/us', 2],
        ]),
      );
    });

    it('treats same-named partitions of different queues as different partitions', async () => {
      const h = harness([{ queue: 'a', name: 'Default', lastOffset: 5 }]);

      await h.service.push('t', undefined, [item('a', 'Default', 'x'), item('b', 'Default', 'x')]);

      expect(insertedOffsets(h)).toEqual([
        ['a/Default', 6, 'x'],
        ['b/Default', 1, 'x'],
      ]);
    });

    it('locks each partition once, however many items name it', async () => {
      const h = harness();

      await h.service.push('t', undefined, [item('q', 'p'), item('q', 'p'), item('q', 'r'), item('z', 'p')]);

      expect(h.lockedPartitions).toEqual([
        [
          { queueId: 'queue:q', name: 'p' },
          { queueId: 'queue:q', name: 'r' },
          { queueId: 'queue:z', name: 'p' },
        ],
      ]);
    });
  });

  it('locks what already exists in one step and creates nothing; a new partition takes the creating path', async () => {
    const h = harness([
      { queue: 'q', name: 'p', lastOffset: 3 },
      { queue: 'z', name: 'p', lastOffset: 9 },
    ]);

    await h.service.push('t', undefined, [item('q', 'p'), item('z', 'p')]);
    expect(h.creating).toBe(0);
    await h.service.push('t', undefined, [item('q', 'p'), item('q', 'new')]);

    expect(h.creating).toBe(1);
    expect(h.lockedPartitions).toEqual([
      [
        { queueId: 'queue:q', name: 'p' },
        { queueId: 'queue:z', name: 'p' },
      ],
      [
        { queueId: 'queue:q', name: 'p' },
        { queueId: 'queue:q', name: 'new' },
      ],
    ]);
    // The first push numbered on from the offsets lockNamed read.
    expect(insertedOffsets(h).slice(0, 2)).toEqual([
      [h.partitionId('q', 'p'), 4, expect.any(String)],
      [h.partitionId('z', 'p'), 10, expect.any(String)],
    ]);
  });

  describe('duplicates by transactionId', () => {
    it('reports one already stored in the partition as duplicate with the original id, and spends no offset on it', async () => {
      const h = harness([{ queue: 'q', name: 'p', lastOffset: 7, messages: { seen: 'original-id' } }]);

      const results = await h.service.push('t', undefined, [item('q', 'p', 'seen'), item('q', 'p', 'new')]);

      expect(results[0]).toEqual({
        index: 0,
        message_id: 'original-id',
        transaction_id: 'seen',
        queueName: 'q',
        status: 'duplicate',
      });
      expect(results[1]).toMatchObject({ index: 1, transaction_id: 'new', status: 'queued' });
      expect(insertedOffsets(h)).toEqual([['q/p', 8, 'new']]);
      expect(h.inserts[0].lastOffsets).toEqual(new Map([['q/p', 8]]));
    });

    it('reports a repeat earlier in the same request as duplicate of the first, stored once', async () => {
      const h = harness();

      const results = await h.service.push('t', undefined, [
        item('q', 'p', 'twice', { n: 1 }),
        item('q', 'p', 'other'),
        item('q', 'p', 'twice', { n: 2 }),
      ]);

      expect(results.map((result) => result.status)).toEqual(['queued', 'queued', 'duplicate']);
      expect(results[2].message_id).toBe(results[0].message_id);
      expect(insertedOffsets(h)).toEqual([
        ['q/p', 1, 'twice'],
        ['q/p', 2, 'other'],
      ]);
      expect(h.inserts[0].messages[0].payloadJson).toBe('{"n":1}');
    });

    it('stores the same transactionId in two partitions as two messages', async () => {
      const h = harness([{ queue: 'q', name: 'p', lastOffset: 3, messages: { tx: 'in-p' } }]);

      const results = await h.service.push('t', undefined, [
        item('q', 'p', 'tx'),
        item('q', 'r', 'tx'),
        item('q', 'r', 'tx'),
      ]);

      expect(results.map((result) => result.status)).toEqual(['duplicate', 'queued', 'duplicate']);
      expect(results[0].message_id).toBe('in-p');
      expect(insertedOffsets(h)).toEqual([['q/r', 1, 'tx']]);
    });

    it('records the payload bytes and count of the new messages only, held to the storage quotas', async () => {
      const h = harness([{ queue: 'q', name: 'p', lastOffset: 2, messages: { a: 'id-a' } }]);

      await h.service.push('t', undefined, [item('q', 'p', 'a', 'old'), item('q', 'p', 'b', 'é'), item('q', 'r')]);

      // "é" is 4 bytes of JSON text, {} 2: the duplicate adds nothing.
      expect(h.stored).toEqual([{ bytes: 6, messages: 2, held: true }]);
    });

    it('writes nothing and notifies no one when every item is a duplicate', async () => {
      const h = harness([{ queue: 'q', name: 'p', lastOffset: 2, messages: { a: 'id-a', b: 'id-b' } }]);

      const results = await h.service.push('t', undefined, [item('q', 'p', 'a'), item('q', 'p', 'b')]);

      expect(results.map((result) => [result.status, result.message_id])).toEqual([
        ['duplicate', 'id-a'],
        ['duplicate', 'id-b'],
      ]);
      expect(h.inserts).toEqual([]);
      expect(h.notified).toBe(0);
      expect(h.announced).toEqual([new Map()]);
      expect(h.pushedCounts).toEqual([]);
      expect(h.historyCounts).toEqual([]);
    });
  });

  it('mints a distinct UUIDv7 transactionId and message id for items without one', async () => {
    const h = harness();

    const results = await h.service.push('t', undefined, [item('q', 'p'), item('q', 'p')]);

    expect(results.map((result) => result.status)).toEqual(['queued', 'queued']);
    for (const result of results) {
      expect(result.transaction_id).toMatch(UUID_V7);
      expect(result.message_id).toMatch(UUID_V7);
    }
    expect(results[0].transaction_id).not.toBe(results[1].transaction_id);
    expect(results[0].message_id).not.toBe(results[1].message_id);
  });

  it('inserts with the producer, trace id and payload text of each item, and its result carries the inserted id', async () => {
    const h = harness();

    const results = await h.service.push('t', 'producer-1', [
      { queue: 'q', partition: 'p', payloadJson: '[1, 2]', transactionId: 'a', traceId: 'trace-a' },
    ]);

    expect(h.inserts).toHaveLength(1);
    expect(h.inserts[0].producerSub).toBe('producer-1');
    expect(h.inserts[0].messages).toEqual([
      {
        partitionId: 'q/p',
        seq: 1,
        id: results[0].message_id,
        transactionId: 'a',
        traceId: 'trace-a',
        payloadJson: '[1, 2]',
        payloadBytes: 6,
        keyId: null,
      },
    ]);
  });

  it('announces and counts only the new messages, per queue and partition', async () => {
    const h = harness([{ queue: 'q', name: 'p', lastOffset: 1, messages: { old: 'id-old' } }]);

    await h.service.push('t', undefined, [
      item('q', 'p', 'old'),
      item('q', 'p', 'a'),
      item('q', 'r', 'b'),
      item('q', 'r', 'c'),
      item('z', 'p', 'd'),
    ]);

    expect(h.announced).toEqual([
      new Map([
        [
          'q',
          new Map([
            ['p', 1],
            ['r', 2],
          ]),
        ],
        ['z', new Map([['p', 1]])],
      ]),
    ]);
    expect(h.notified).toBe(1);
    expect(h.pushedCounts).toEqual([
      { queue: 'q', value: 3 },
      { queue: 'z', value: 1 },
    ]);
    expect(h.historyCounts).toEqual(h.pushedCounts);
  });

  it('refuses with 409 and writes nothing when a queue is deleted before the push could lock it', async () => {
    const h = harness([], ['gone']);

    const push = h.service.push('t', undefined, [item('kept', 'p', 'a'), item('gone', 'p', 'b')]);

    await expect(push).rejects.toBeInstanceOf(ConflictException);
    await expect(push).rejects.toMatchObject({
      response: { error: 'a queue was deleted while this push was writing to it; retry' },
    });
    expect(h.inserts).toEqual([]);
    expect(h.announced).toEqual([]);
  });
});
