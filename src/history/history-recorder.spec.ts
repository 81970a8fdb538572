import { AppConfig } from '../config/app-config';
import { Statement } from '../database/statement';
import { TransactionRunner } from '../database/transaction-runner';
import { DrainService } from '../lifecycle/drain.service';
import { MetricsService } from '../metrics/metrics.service';
import { HISTORY_MAX_PENDING, HistoryRecorder } from './history-recorder';
import { HistoryRepository, MinuteCounts } from './history.repository';

function recorder(flushMs = 60_000, failures = 0) {
  const sent: MinuteCounts[][] = [];
  let failing = failures;
  // The flush statement's columns, read back as the counts they carry.
  const transactions = {
    runOne: async (tenantId: string | undefined, { text, values }: Statement<void>) => {
      expect(tenantId).toBeUndefined();
      expect(text).toContain('INSERT INTO queue_history');
      if (failing > 0) {
        failing -= 1;
        throw new Error('connection refused');
      }
      const [tenants, queues, minutes, pushed, popped, acked, deadLettered, maxWaitMs] = values as unknown[][];
      sent.push(
        tenants.map((tenantId, row) => ({
          tenantId: tenantId as string,
          queue: queues[row] as string,
          minute: Date.parse(minutes[row] as string),
          pushed: pushed[row] as number,
          popped: popped[row] as number,
          acked: acked[row] as number,
          deadLettered: deadLettered[row] as number,
          maxWaitMs: maxWaitMs[row] as number | null,
        })),
      );
    },
  } as unknown as TransactionRunner;
  const metrics = new MetricsService({
    metrics: { tenantLabels: false, maxQueueSeries: 10, maxQueueSeriesPerTenant: 10 },
    workers: 1,
  } as AppConfig);
  const config = { history: { flushMs, retentionDays: 7 } } as AppConfig;
  const history = new HistoryRecorder(config, new HistoryRepository(), transactions, {} as DrainService, metrics);
  const dropped = async () =>
    (await metrics.registry.getSingleMetric('leasehold_history_dropped_total')!.get()).values[0]?.value ?? 0;
  return { history, sent, dropped };
}

// Mid-minute, so that no test's counts straddle two minutes.
const NOW = 1_800_000_030_000;

describe('HistoryRecorder', () => {
  beforeEach(() => jest.spyOn(Date, 'now').mockReturnValue(NOW));
  afterEach(() => jest.restoreAllMocks());

  it('sends one row per queue and minute with everything counted for it, then starts again from zero', async () => {
    const { history, sent } = recorder();
    history.pushed('t1', 'orders', 3);
    history.pushed('t1', 'orders', 2);
    history.popped('t1', 'orders', 4, new Date(NOW - 5_000).toISOString());
    history.popped('t1', 'orders', 1, new Date(NOW - 1_000).toISOString());
    history.acked('t1', 'orders', 4);
    history.deadLettered('t1', 'orders', 1);
    history.pushed('t2', 'orders', 7);

    await history.flush();
    await history.flush();

    expect(sent).toHaveLength(1);
    const [orders, other] = sent[0];
    expect(orders).toMatchObject({ tenantId: 't1', queue: 'orders', pushed: 5, popped: 5, acked: 4, deadLettered: 1 });
    expect(orders.maxWaitMs).toBe(5_000);
    expect(orders.minute).toBe(NOW - 30_000);
    expect(other).toMatchObject({ tenantId: 't2', queue: 'orders', pushed: 7, popped: 0, maxWaitMs: null });
  });

  it('keeps the counts of a failed flush and adds them to the next one', async () => {
    const { history, sent } = recorder(60_000, 1);
    history.pushed('t', 'q', 2);
    await history.flush();
    history.pushed('t', 'q', 3);

    await history.flush();

    expect(sent).toEqual([[expect.objectContaining({ pushed: 5 })]]);
  });

  it('counts nothing with HISTORY_FLUSH_MS=0', async () => {
    const { history, sent } = recorder(0);
    history.pushed('t', 'q', 2);
    await history.flush();
    expect(history.enabled).toBe(false);
    expect(sent).toEqual([]);
  });

  it('drops, and counts as dropped, what comes past its bound while the database is away', async () => {
    const { history, sent, dropped } = recorder(60_000, 1);
    for (let n = 0; n < HISTORY_MAX_PENDING + 5; n++) history.pushed('t', `q${n}`, 1);
    await history.flush();
    history.pushed('t', 'late', 1);

    await history.flush();

    expect(await dropped()).toBe(6);
    expect(sent.flat()).toHaveLength(HISTORY_MAX_PENDING);
  });
});
