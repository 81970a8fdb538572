import { StoredRetention } from '../retention/retention-policy';
import { RetentionSettings } from './queue-options';
import { NOTHING_SET, shortenedRetentionProblem } from './shortened-retention';

const DEFAULTS = { completedSeconds: 3_600, pendingSeconds: 1_209_600, deadLetterSeconds: 1_209_600 };

const stored = (set: Partial<StoredRetention> = {}): StoredRetention => ({ ...NOTHING_SET, ...set });

function problem(before: StoredRetention | undefined, sent: RetentionSettings, floor = 0): string | undefined {
  return shortenedRetentionProblem(before, sent, Object.keys(sent), DEFAULTS, floor, 'admin');
}

describe('shortenedRetentionProblem', () => {
  it('names an option that deletes sooner than the broker default in force, with that value', () => {
    expect(problem(stored(), { retentionSeconds: 1 })).toBe(
      'options.retentionSeconds: deleting unconsumed messages sooner than the value in force (1209600 s) needs the admin role',
    );
    expect(problem(stored(), { completedRetentionSeconds: 60 })).toBe(
      'options.completedRetentionSeconds: deleting consumed messages sooner than the value in force (3600 s) needs the admin role',
    );
    expect(problem(stored(), { dlqRetentionSeconds: 86_400 })).toMatch(/^options\.dlqRetentionSeconds: deleting dead/);
  });

  it('takes a rule that deletes nothing now as never: setting one at all is sooner', () => {
    expect(problem(stored(), { maxWaitTimeSeconds: 86_400 })).toBe(
      'options.maxWaitTimeSeconds: evicting waiting messages sooner than the value in force (never) needs the admin role',
    );
    expect(problem(stored({ retentionEnabled: false }), { retentionEnabled: true })).toMatch(
      /^options\.retentionEnabled: deleting unconsumed messages sooner than the value in force \(never\)/,
    );
    expect(problem(stored({ completedRetentionSeconds: 0 }), { completedRetentionSeconds: 7_200 })).toMatch(
      /\(never\)/,
    );
  });

  it('takes ttl as a rule of its own: setting it, or shortening it, is sooner; the same value is not', () => {
    expect(problem(stored(), { ttl: 3_600 })).toBe(
      'options.ttl: expiring unconsumed messages sooner than the value in force (never) needs the admin role',
    );
    expect(problem(stored({ ttl: 3_600 }), { ttl: 60 })).toMatch(/^options\.ttl: .*\(3600 s\)/);
    expect(problem(stored({ ttl: 3_600 }), { ttl: 3_600 })).toBeUndefined();
    expect(problem(stored({ ttl: 3_600 }), { ttl: 0 })).toBeUndefined();
  });

  it('takes null as the broker default it stands for: back from a longer value is sooner', () => {
    expect(problem(stored({ completedRetentionSeconds: 7_200 }), { completedRetentionSeconds: null })).toMatch(
      /^options\.completedRetentionSeconds: .*\(7200 s\)/,
    );
    expect(problem(stored({ completedRetentionSeconds: 60 }), { completedRetentionSeconds: null })).toBeUndefined();
  });

  it('lets anyone keep messages longer, keep them for ever, send what is in force, or set maxSize', () => {
    expect(problem(stored(), { retentionSeconds: 2_000_000, completedRetentionSeconds: 0 })).toBeUndefined();
    expect(problem(stored({ retentionSeconds: 60 }), { retentionEnabled: false })).toBeUndefined();
    expect(problem(stored({ retentionSeconds: 60 }), { retentionSeconds: 60 })).toBeUndefined();
    expect(problem(stored(), { retentionSeconds: 1_209_600, maxSize: 1 })).toBeUndefined();
  });

  it('names the first option sent of the rule it shortens', () => {
    expect(problem(stored({ retentionEnabled: false }), { retentionEnabled: true, retentionSeconds: 10 })).toMatch(
      /^options\.retentionEnabled:/,
    );
    expect(problem(stored({ retentionEnabled: false }), { retentionSeconds: 10, retentionEnabled: true })).toMatch(
      /^options\.retentionSeconds:/,
    );
  });

  it('lets a queue being created take any retention, but not one under the floor', () => {
    expect(problem(undefined, { retentionSeconds: 10, completedRetentionSeconds: 5 })).toBeUndefined();
    expect(problem(undefined, { retentionSeconds: 10 }, 3_600)).toBe(
      'options.retentionSeconds: below QUEUE_MIN_RETENTION_SECONDS (3600 s) needs the admin role',
    );
    expect(problem(undefined, { maxWaitTimeSeconds: 60 }, 3_600)).toMatch(/^options\.maxWaitTimeSeconds: below/);
    expect(problem(undefined, { retentionSeconds: 0, maxWaitTimeSeconds: 7_200 }, 3_600)).toBeUndefined();
  });

  it('holds an existing queue to the floor too, but not a value already in force', () => {
    expect(problem(stored({ retentionSeconds: 0 }), { retentionSeconds: 60 }, 3_600)).toMatch(/sooner/);
    expect(problem(stored({ retentionSeconds: 60 }), { retentionSeconds: 60 }, 3_600)).toBeUndefined();
    expect(problem(stored({ retentionSeconds: 30 }), { retentionSeconds: 60 }, 3_600)).toMatch(
      /^options\.retentionSeconds: below QUEUE_MIN_RETENTION_SECONDS/,
    );
  });
});
