import { AppConfig } from '../config/app-config';

/** A queue's retention settings as stored: null means the broker's default. */
export interface StoredRetention {
  retentionEnabled: boolean | null;
  retentionSeconds: number | null;
  completedRetentionSeconds: number | null;
  maxWaitTimeSeconds: number | null;
  maxSize: number | null;
  dlqRetentionSeconds: number | null;
  ttl: number | null;
}

/** The columns of `queues` that hold its StoredRetention. */
export interface RetentionRow {
  retention_enabled: boolean | null;
  retention_seconds: number | null;
  completed_retention_seconds: number | null;
  max_wait_time_seconds: number | null;
  max_size: number | null;
  dlq_retention_seconds: number | null;
  ttl_seconds: number | null;
}

/** Typed against RetentionRow, so a column added there and not here does not compile. */
const RETENTION_COLUMNS: Record<keyof RetentionRow, true> = {
  retention_enabled: true,
  retention_seconds: true,
  completed_retention_seconds: true,
  max_wait_time_seconds: true,
  max_size: true,
  dlq_retention_seconds: true,
  ttl_seconds: true,
};

export const retentionColumns = (alias: string): string =>
  Object.keys(RETENTION_COLUMNS)
    .map((column) => `${alias}.${column}`)
    .join(', ');

export function storedRetentionOf(row: RetentionRow): StoredRetention {
  return {
    retentionEnabled: row.retention_enabled,
    retentionSeconds: row.retention_seconds,
    completedRetentionSeconds: row.completed_retention_seconds,
    maxWaitTimeSeconds: row.max_wait_time_seconds,
    maxSize: row.max_size,
    dlqRetentionSeconds: row.dlq_retention_seconds,
    ttl: row.ttl_seconds,
  };
}

export interface RetentionDefaults {
  completedSeconds: number;
  pendingSeconds: number;
  deadLetterSeconds: number;
}

/** What retention does to a queue; null: that rule keeps everything. */
export interface RetentionPolicy {
  /** Delete messages every group has moved past, this long after they were pushed. */
  completedSeconds: number | null;
  /** Delete any message this long after it was pushed (SQS's retention period). */
  pendingSeconds: number | null;
  /** Evict a message waiting longer than this for some group: dead-letter it for that group, then remove it. */
  maxWaitSeconds: number | null;
  /** Queen's name for the same eviction; the shorter of the two is in force (evictAfterSeconds). */
  ttlSeconds: number | null;
  /** Most messages not yet consumed by the slowest group; pushes past it fail per item. */
  maxSize: number | null;
  deadLetterSeconds: number | null;
}

export function retentionDefaultsOf(config: AppConfig): RetentionDefaults {
  const { completedSeconds, pendingSeconds, deadLetterSeconds } = config.retention;
  return { completedSeconds, pendingSeconds, deadLetterSeconds };
}

const positive = (seconds: number | null | undefined): number | null =>
  seconds === null || seconds === undefined || seconds <= 0 ? null : seconds;

export function retentionPolicy(stored: StoredRetention, defaults: RetentionDefaults): RetentionPolicy {
  return {
    completedSeconds: positive(stored.completedRetentionSeconds ?? defaults.completedSeconds),
    pendingSeconds:
      stored.retentionEnabled === false ? null : positive(stored.retentionSeconds ?? defaults.pendingSeconds),
    maxWaitSeconds: positive(stored.maxWaitTimeSeconds),
    ttlSeconds: positive(stored.ttl),
    maxSize: positive(stored.maxSize),
    deadLetterSeconds: positive(stored.dlqRetentionSeconds ?? defaults.deadLetterSeconds),
  };
}

/** When a message waiting for a group is evicted: the shorter of maxWaitTimeSeconds and ttl; null for never. */
export function evictAfterSeconds(policy: RetentionPolicy): number | null {
  const limits = [policy.maxWaitSeconds, policy.ttlSeconds].filter((seconds): seconds is number => seconds !== null);
  return limits.length === 0 ? null : Math.min(...limits);
}

export function retentionOptionsInForce(policy: RetentionPolicy): Record<keyof StoredRetention, number | boolean> {
  return {
    completedRetentionSeconds: policy.completedSeconds ?? 0,
    retentionEnabled: policy.pendingSeconds !== null,
    retentionSeconds: policy.pendingSeconds ?? 0,
    maxWaitTimeSeconds: policy.maxWaitSeconds ?? 0,
    maxSize: policy.maxSize ?? 0,
    dlqRetentionSeconds: policy.deadLetterSeconds ?? 0,
    ttl: policy.ttlSeconds ?? 0,
  };
}
