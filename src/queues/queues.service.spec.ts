import { BadRequestException, ForbiddenException, HttpException, NotFoundException } from '@nestjs/common';
import type { Role } from '../auth/principal';
import type { AppConfig } from '../config/app-config';
import type { Statement } from '../database/statement';
import type { StatementReader, TransactionRunner } from '../database/transaction-runner';
import type { PayloadCipher } from '../encryption/payload-cipher';
import type { TenantQuotas } from '../limits/tenant-quotas';
import type { MetricsService } from '../metrics/metrics.service';
import type { GroupTotals } from '../consumer-groups/consumer-groups.repository';
import type { UsageChange } from '../limits/stored-usage.repository';
import { StoredRetention } from '../retention/retention-policy';
import type { Writes } from '../wakeup/writes';
import { ConfigureRequestPipe } from './configure-request.pipe';
import { QUEUE_OPTIONS, StoredOptions } from './queue-options';
import type {
  ConsumerGroupTotals,
  ConsumerStats,
  PartitionStats,
  QueueListEntry,
  QueueRecord,
  QueueSettings,
  QueuesRepository,
  QueueSummary,
} from './queues.repository';
import { ENCRYPTION_WITHOUT_KEY, QueuesService } from './queues.service';

const TENANT = '00000000-0000-0000-0000-0000000000aa';
const TIMESTAMP = '2026-07-30T11:06:44.512873Z';
const ADMIN: Role[] = ['admin'];
const WRITER: Role[] = ['read-write'];

const FRESH: StoredOptions = Object.fromEntries(
  QUEUE_OPTIONS.map((option) => [option.key, option.retention ? null : option.default!]),
);

/** What the fake queue row holds; configure applies settings to it as the UPDATE does. */
function record(name: string, options: Partial<StoredOptions> = {}): QueueRecord {
  const stored = { ...FRESH, ...options } as StoredOptions;
  const retention = Object.fromEntries(
    QUEUE_OPTIONS.filter((option) => option.retention).map((option) => [option.key, stored[option.key]]),
  ) as unknown as StoredRetention;
  return {
    id: `id-${name}`,
    name,
    options: stored,
    namespace: null,
    task: null,
    retention,
    extraOptions: {},
    createdAt: TIMESTAMP,
    updatedAt: TIMESTAMP,
  };
}

function summary(name: string, totals: Partial<QueueSummary> = {}): QueueSummary {
  return {
    ...record(name),
    partitions: 0,
    messages: 0,
    pending: 0,
    retained: 0,
    deadLetters: 0,
    consumerGroups: 0,
    ...totals,
  };
}

/** A statement whose answer is `answer()`, as the fake unit of work or reader runs it. */
const answering = <T>(answer: () => T): Statement<T> => ({ text: '', values: [], parse: answer });
const answer = <T>(value: T): Statement<T> => answering(() => value);

/** The queue row configure works on, as the repository's statements would leave it. */
function fakeRepository(existing: QueueRecord | undefined) {
  let row = existing;
  return {
    upsert: jest.fn((_tenant: string, name: string) =>
      answering(() => {
        const created = row === undefined;
        row ??= record(name);
        return { id: row.id, created, retention: row.retention };
      }),
    ),
    configure: jest.fn((_tenant: string, _name: string, settings: QueueSettings) =>
      answering(() => {
        const stored: StoredOptions = { ...row!.options };
        for (const [key, value] of Object.entries(settings.options)) if (value !== undefined) stored[key] = value;
        row = record(row!.name, stored);
        return row;
      }),
    ),
    recheckRetention: jest.fn(() => answer(undefined)),
    listPage: jest.fn(() => answer<QueueListEntry[]>([])),
    summaries: jest.fn(
      async (
        _reader: StatementReader,
        _tenant: string,
        _name: string | undefined,
        _ids?: string[],
      ): Promise<QueueSummary[]> => [],
    ),
    summariesWithGroups: jest.fn(async () => ({
      summaries: [] as QueueSummary[],
      groups: new Map<string, GroupTotals>(),
    })),
    retentionLagSeconds: jest.fn(() => answer(0)),
    partitionStats: jest.fn((_tenant: string, _queueId: string, _after: string | undefined, _limit: number) =>
      answer<PartitionStats[]>([]),
    ),
    consumerGroupTotals: jest.fn(() => answer<ConsumerGroupTotals[]>([])),
    consumerStats: jest.fn(() => answer<ConsumerStats[]>([])),
    find: jest.fn(() => answer<QueueRecord | undefined>(undefined)),
    liveLeases: jest.fn(() => answer({ now: TIMESTAMP, leases: [], truncated: false })),
    delete: jest.fn(async (): Promise<UsageChange | undefined> => undefined),
  };
}

interface Harness {
  service: QueuesService;
  repository: ReturnType<typeof fakeRepository>;
  admitted: Array<{ kind: string; count: number }>;
  unit: { stored: unknown[]; deleted: string[]; afterCommit: Array<() => void> };
  forgotten: string[];
  metricsDeleted: string[];
}

function harness(
  options: { existing?: QueueRecord; keyed?: boolean; responseMaxBytes?: number; minRetentionSeconds?: number } = {},
): Harness {
  const admitted: Harness['admitted'] = [];
  const forgotten: string[] = [];
  const metricsDeleted: string[] = [];
  const unit: Harness['unit'] = { stored: [], deleted: [], afterCommit: [] };
  const repository = fakeRepository(options.existing);
  const manager = {};
  const run = async <T>(statement: Statement<T>): Promise<T> => statement.parse([]);
  const transactions = { read: (_tenant: string, work: (reader: unknown) => unknown) => work({ run, last: run }) };
  const writes = {
    run: (_tenant: string, work: (u: unknown) => unknown) =>
      work({
        manager,
        run,
        stores: (change: unknown) => unit.stored.push(change),
        queueDeleted: (name: string) => unit.deleted.push(name),
        afterCommit: (effect: () => void) => unit.afterCommit.push(effect),
      }),
  };
  const quotas = {
    admit: async (_tenant: string, kind: string, count: number) => {
      admitted.push({ kind, count });
    },
    forget: (tenant: string) => forgotten.push(tenant),
  };
  const metrics = { queueDeleted: (_tenant: string, name: string) => metricsDeleted.push(name) };
  const config = {
    limits: { responseMaxBytes: options.responseMaxBytes ?? 1_000_000 },
    retention: {
      completedSeconds: 3_600,
      pendingSeconds: 1_209_600,
      deadLetterSeconds: 1_209_600,
      minSeconds: options.minRetentionSeconds ?? 0,
    },
  };
  const service = new QueuesService(
    transactions as unknown as TransactionRunner,
    writes as unknown as Writes,
    repository as unknown as QueuesRepository,
    quotas as unknown as TenantQuotas,
    metrics as unknown as MetricsService,
    { enabled: options.keyed ?? false } as PayloadCipher,
    config as unknown as AppConfig,
  );
  return { service, repository, admitted, unit, forgotten, metricsDeleted };
}

const command = (body: unknown) => new ConfigureRequestPipe().transform(body);

async function refusal(promise: Promise<unknown>): Promise<HttpException> {
  try {
    await promise;
  } catch (error) {
    return error as HttpException;
  }
  throw new Error('it was not refused');
}

describe('QueuesService.configure', () => {
  it('creates the queue, counts it against the quota and echoes only the options sent, in the order sent', async () => {
    const h = harness();

    const answer = await h.service.configure(
      TENANT,
      WRITER,
      command({ queue: 'orders', options: { retryLimit: 5, leaseTime: 30 } }),
    );

    expect(Object.entries(answer.options)).toEqual([
      ['retryLimit', 5],
      ['leaseTime', 30],
    ]);
    expect(answer).toMatchObject({ configured: true, queue: 'orders' });
    expect(h.admitted).toEqual([{ kind: 'queues', count: 1 }]);
  });

  it('admits no new queue when it existed', async () => {
    const h = harness({ existing: record('orders') });

    await h.service.configure(TENANT, WRITER, command({ queue: 'orders' }));

    expect(h.admitted).toEqual([{ kind: 'queues', count: 0 }]);
  });

  it('echoes a retention option with the value in force: null as the broker default, off as 0', async () => {
    const h = harness({ existing: record('orders', { completedRetentionSeconds: 60 }) });

    const answer = await h.service.configure(
      TENANT,
      ADMIN,
      command({
        queue: 'orders',
        options: { completedRetentionSeconds: null, retentionEnabled: false, retentionSeconds: 9 },
      }),
    );

    expect(answer.options).toEqual({ completedRetentionSeconds: 3_600, retentionEnabled: false, retentionSeconds: 0 });
  });

  it('asks the retention job to look again only when a retention option was sent', async () => {
    const h = harness();

    await h.service.configure(TENANT, WRITER, command({ queue: 'orders', options: { leaseTime: 5 } }));
    expect(h.repository.recheckRetention).not.toHaveBeenCalled();

    await h.service.configure(TENANT, WRITER, command({ queue: 'orders', options: { maxSize: 10 } }));
    expect(h.repository.recheckRetention).toHaveBeenCalledTimes(1);
  });

  it('refuses encryptionEnabled true with 400 on a broker without a key, before any write', async () => {
    const h = harness({ keyed: false });

    const error = await refusal(
      h.service.configure(TENANT, ADMIN, command({ queue: 'orders', options: { encryptionEnabled: true } })),
    );

    expect(error).toBeInstanceOf(BadRequestException);
    expect(error.getResponse()).toEqual({ error: ENCRYPTION_WITHOUT_KEY });
    expect(h.repository.upsert).not.toHaveBeenCalled();
  });

  it('takes encryptionEnabled true on a broker with a key, and false on any', async () => {
    await expect(
      harness({ keyed: true }).service.configure(
        TENANT,
        WRITER,
        command({ queue: 'orders', options: { encryptionEnabled: true } }),
      ),
    ).resolves.toMatchObject({ options: { encryptionEnabled: true } });
    await expect(
      harness().service.configure(TENANT, WRITER, command({ queue: 'orders', options: { encryptionEnabled: false } })),
    ).resolves.toMatchObject({ options: { encryptionEnabled: false } });
  });

  it('refuses with 403 a token without the admin role shortening what an existing queue keeps, changing nothing', async () => {
    const h = harness({ existing: record('orders') });

    const error = await refusal(
      h.service.configure(TENANT, WRITER, command({ queue: 'orders', options: { retentionSeconds: 60 } })),
    );

    expect(error).toBeInstanceOf(ForbiddenException);
    expect((error.getResponse() as { error: string }).error).toMatch(
      /^options\.retentionSeconds: .* needs the admin role$/,
    );
    expect(h.repository.configure).not.toHaveBeenCalled();
  });

  it('lets the admin role shorten it', async () => {
    const h = harness({ existing: record('orders') });

    const answer = await h.service.configure(
      TENANT,
      ADMIN,
      command({ queue: 'orders', options: { retentionSeconds: 60 } }),
    );

    expect(answer.options).toEqual({ retentionSeconds: 60 });
  });
});

describe('QueuesService listings', () => {
  it('cuts a page where the answer would pass RESPONSE_MAX_BYTES, always keeping one queue, and names the next', async () => {
    const h = harness({ responseMaxBytes: 1_024 + 500 });
    h.repository.listPage.mockReturnValue(
      answer([
        { id: 'id-a', name: 'a', answerBytes: 900 },
        { id: 'id-b', name: 'b', answerBytes: 1_800 },
        { id: 'id-c', name: 'c', answerBytes: 2_700 },
      ]),
    );
    h.repository.summaries.mockResolvedValue([summary('a')]);

    const page = await h.service.list(TENANT, { after: undefined, limit: 5 });

    expect(h.repository.summaries.mock.calls[0][3]).toEqual(['id-a']);
    expect(page.next).toBe('a');
    expect(page.queues.map((queue) => [queue.name, queue.options])).toEqual([
      ['a', { leaseTime: 60, retryLimit: 3, deadLetterQueue: true }],
    ]);
  });

  it('answers next null when the page holds the rest', async () => {
    const h = harness();
    h.repository.listPage.mockReturnValue(answer([{ id: 'id-a', name: 'a', answerBytes: 10 }]));
    h.repository.summaries.mockResolvedValue([summary('a')]);

    expect((await h.service.list(TENANT, { after: undefined, limit: 5 })).next).toBeNull();
  });

  it('groups queues by namespace with summed counts, by name, leaving out those without one', async () => {
    const h = harness();
    h.repository.summaries.mockResolvedValue([
      { ...summary('q1', { partitions: 2, messages: 5, pending: 1 }), namespace: 'zeta' },
      { ...summary('q2', { partitions: 1, messages: 3, pending: 3 }), namespace: 'alpha' },
      { ...summary('q3', { partitions: 4, messages: 1, pending: 0 }), namespace: 'zeta' },
      summary('q4', { partitions: 9 }),
    ]);

    expect(await h.service.namespaces(TENANT)).toEqual({
      namespaces: [
        { name: 'alpha', queues: 1, partitions: 1, messages: { total: 3, pending: 3 } },
        { name: 'zeta', queues: 2, partitions: 6, messages: { total: 6, pending: 1 } },
      ],
    });
  });

  it('answers 404 for the detail of a queue that does not exist', async () => {
    const error = await refusal(harness().service.detail(TENANT, 'missing', undefined, 10));

    expect(error).toBeInstanceOf(NotFoundException);
    expect(error.getResponse()).toEqual({ error: 'queue not found' });
  });

  it("pages a queue's partitions and gives each group its positions, without the subscription start twice", async () => {
    const h = harness();
    h.repository.summariesWithGroups.mockResolvedValue({ summaries: [summary('orders')], groups: new Map() });
    h.repository.partitionStats.mockReturnValue(
      answer([
        { id: 'p1', name: 'a', messages: 1, createdAt: TIMESTAMP },
        { id: 'p2', name: 'b', messages: 2, createdAt: TIMESTAMP },
        { id: 'p3', name: 'c', messages: 3, createdAt: TIMESTAMP },
      ]),
    );
    h.repository.consumerGroupTotals.mockReturnValue(
      answer([{ consumerGroup: 'g', subscriptionFrom: null, lag: 4, liveLeases: 1 }]),
    );
    const position: ConsumerStats = {
      consumerGroup: 'g',
      subscriptionFrom: null,
      partitionId: 'p1',
      partition: 'a',
      committedOffset: 1,
      lag: 0,
      leased: false,
      leaseExpiresAt: null,
      retryCount: 0,
      deliveryAttempt: 0,
    };
    h.repository.consumerStats.mockReturnValue(answer([position, { ...position, consumerGroup: 'gone' }]));

    const detail = await h.service.detail(TENANT, 'orders', undefined, 2);

    expect(h.repository.partitionStats.mock.calls[0][3]).toBe(3);
    expect(detail.partitions.map((partition) => partition.name)).toEqual(['a', 'b']);
    expect(detail.partitionsTruncated).toBe(true);
    expect(detail.partitionsNext).toBe('b');
    const { consumerGroup: _group, subscriptionFrom: _from, ...shown } = position;
    expect(detail.consumerGroups).toEqual([
      { name: 'g', subscriptionFrom: null, lag: 4, liveLeases: 1, partitions: [shown] },
    ]);
  });

  it('answers 404 for the leases of a queue that does not exist', async () => {
    expect(await refusal(harness().service.leases(TENANT, 'missing', 10))).toBeInstanceOf(NotFoundException);
  });
});

describe('QueuesService.delete', () => {
  it('answers existed false for a queue that is not there, recording nothing', async () => {
    const h = harness();

    expect(await h.service.delete(TENANT, 'orders')).toEqual({ deleted: false, queue: 'orders', existed: false });
    expect(h.unit).toEqual({ stored: [], deleted: [], afterCommit: [] });
  });

  it('gives back what the queue stored and forgets its quotas and metrics only after the commit', async () => {
    const h = harness();
    h.repository.delete.mockResolvedValue({ bytes: 120, messages: 3 });

    expect(await h.service.delete(TENANT, 'orders')).toEqual({ deleted: true, queue: 'orders', existed: true });
    expect(h.unit.stored).toEqual([{ bytes: -120, messages: -3 }]);
    expect(h.unit.deleted).toEqual(['orders']);
    expect(h.forgotten).toEqual([]);

    for (const effect of h.unit.afterCommit) effect();
    expect(h.forgotten).toEqual([TENANT]);
    expect(h.metricsDeleted).toEqual(['orders']);
  });
});
