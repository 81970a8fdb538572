import { RetentionDefaults, retentionPolicy, RetentionPolicy, StoredRetention } from '../retention/retention-policy';
import { RETENTION_OPTIONS, RetentionOption, RetentionSettings } from './queue-options';

type DeletingRule = 'completedSeconds' | 'pendingSeconds' | 'maxWaitSeconds' | 'ttlSeconds' | 'deadLetterSeconds';

/**
 * The rules that delete or evict stored messages, each with the options that set it. maxSize deletes nothing (a push
 * past it fails), so it is not one of them.
 */
const DELETING_RULES: ReadonlyArray<{ rule: DeletingRule; options: readonly RetentionOption[]; doing: string }> = [
  { rule: 'completedSeconds', options: ['completedRetentionSeconds'], doing: 'deleting consumed messages' },
  { rule: 'pendingSeconds', options: ['retentionSeconds', 'retentionEnabled'], doing: 'deleting unconsumed messages' },
  { rule: 'maxWaitSeconds', options: ['maxWaitTimeSeconds'], doing: 'evicting waiting messages' },
  { rule: 'ttlSeconds', options: ['ttl'], doing: 'expiring unconsumed messages' },
  { rule: 'deadLetterSeconds', options: ['dlqRetentionSeconds'], doing: 'deleting dead letters' },
];

/** A queue's retention as stored once `sent` is applied: null resets an option to the broker's default. */
export function withSettings(stored: StoredRetention, sent: RetentionSettings): StoredRetention {
  const next: Record<string, unknown> = { ...stored };
  for (const option of RETENTION_OPTIONS) if (sent[option] !== undefined) next[option] = sent[option];
  return next as unknown as StoredRetention;
}

const seconds = (value: number | null): string => (value === null ? 'never' : `${value} s`);

/** The first option sent that sets `options`, in the order sent. */
function named(options: readonly RetentionOption[], sent: readonly string[]): RetentionOption | undefined {
  return sent.find((name): name is RetentionOption => (options as readonly string[]).includes(name));
}

/**
 * Why a caller without `role`, the role that may clear a queue, may not send these options, or undefined when it may:
 * an option that makes a rule delete sooner than the one in force (`before` undefined: a queue this request creates,
 * which stores nothing yet), or that changes a rule to less than the operator's floor (0: none).
 */
export function shortenedRetentionProblem(
  before: StoredRetention | undefined,
  sent: RetentionSettings,
  sentOrder: readonly string[],
  defaults: RetentionDefaults,
  floorSeconds: number,
  role: string,
): string | undefined {
  const after = retentionPolicy(withSettings(before ?? NOTHING_SET, sent), defaults);
  const old: RetentionPolicy | undefined = before && retentionPolicy(before, defaults);
  for (const { rule, options, doing } of DELETING_RULES) {
    const option = named(options, sentOrder);
    const now = after[rule];
    const was = old?.[rule];
    if (option === undefined || now === null || now === was) continue;
    if (was !== undefined && (was === null || now < was)) {
      return `options.${option}: ${doing} sooner than the value in force (${seconds(was)}) needs the ${role} role`;
    }
    if (now < floorSeconds) {
      return `options.${option}: below QUEUE_MIN_RETENTION_SECONDS (${floorSeconds} s) needs the ${role} role`;
    }
  }
  return undefined;
}

/** A queue that sets none of the options: the broker's defaults are in force. */
export const NOTHING_SET: StoredRetention = {
  retentionEnabled: null,
  retentionSeconds: null,
  completedRetentionSeconds: null,
  maxWaitTimeSeconds: null,
  maxSize: null,
  dlqRetentionSeconds: null,
  ttl: null,
};
