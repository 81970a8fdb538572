import { DatabaseError } from 'pg';
import { QueryFailedError } from './query-failed-error';
import { loadConfig } from '../config/load-config';
import { MetricsService } from '../metrics/metrics.service';
import { CONFLICT_ATTEMPTS, ConflictRetries } from './conflict-retries';
import { monotonicNow } from './deadline';

function rolledBack(code: string): QueryFailedError {
  const error = new DatabaseError('rolled back', 0, 'error');
  error.code = code;
  return new QueryFailedError('UPDATE consumers ...', [], error);
}

async function counted(metrics: MetricsService, sqlstate: string): Promise<number> {
  const { values } = await metrics.databaseRetries.get();
  return values.find((value) => value.labels.sqlstate === sqlstate)?.value ?? 0;
}

describe('ConflictRetries', () => {
  const plenty = (): number => monotonicNow() + 60_000;

  it('runs a deadlock or a serialization failure again after a short jittered pause, up to three attempts', async () => {
    const metrics = new MetricsService(loadConfig({}));
    const retries = new ConflictRetries(metrics);
    for (let attempt = 1; attempt < CONFLICT_ATTEMPTS; attempt += 1) {
      const pause = retries.after(rolledBack('40P01'), attempt, plenty());
      // 20 ms doubled per attempt, from half to one and a half of it.
      expect(pause).toBeGreaterThanOrEqual(10 * 2 ** (attempt - 1));
      expect(pause).toBeLessThanOrEqual(30 * 2 ** (attempt - 1));
    }
    expect(retries.after(rolledBack('40P01'), CONFLICT_ATTEMPTS, plenty())).toBeUndefined();
    expect(retries.after(rolledBack('40001'), 1, plenty())).toBeDefined();
    expect(CONFLICT_ATTEMPTS).toBe(3);
    expect(await counted(metrics, '40P01')).toBe(CONFLICT_ATTEMPTS - 1);
    expect(await counted(metrics, '40001')).toBe(1);
  });

  it('answers the failure instead when less than a second of the bound is left', async () => {
    const metrics = new MetricsService(loadConfig({}));
    const retries = new ConflictRetries(metrics);
    expect(retries.after(rolledBack('40P01'), 1, monotonicNow() + 900)).toBeUndefined();
    expect(retries.after(rolledBack('40P01'), 1, monotonicNow() + 1_000)).toBeUndefined();
    expect(retries.after(rolledBack('40P01'), 1, monotonicNow() + 1_500)).toBeDefined();
    expect(await counted(metrics, '40P01')).toBe(1);
  });

  it('never runs anything else again', () => {
    const retries = new ConflictRetries(new MetricsService(loadConfig({})));
    for (const code of ['23505', '55P03', '57014', '25006']) {
      expect(retries.after(rolledBack(code), 1, plenty())).toBeUndefined();
    }
    expect(retries.after(new Error('a bug of ours'), 1, plenty())).toBeUndefined();
  });
});
