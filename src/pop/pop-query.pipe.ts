import { Injectable, PipeTransform } from '@nestjs/common';
import {
  INT32_MAX,
  invalid,
  isPlainObject,
  queryBoolean,
  queryInteger,
  queryName,
  queryTimestamp,
} from '../common/input';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';


export type SubscriptionMode = 'all' | 'new';

export interface PopOptions {
  batch: number;
  partitions: number;
  wait: boolean;
  timeoutMs: number;
  /** Undefined means the queue's leaseTime. */
  leaseSeconds: number | undefined;
  consumerGroup: string;
  subscriptionMode: SubscriptionMode;
  /** An explicit starting point; wins over subscriptionMode. */
  subscriptionFrom: string | undefined;
  autoAck: boolean;
}

export const POP_LIMITS = {
  batch: { min: 1, max: 10_000, fallback: 200 },
  partitions: { min: 1, max: 1_000, fallback: 1 },
  timeout: { min: 0, max: 600_000, fallback: 30_000 },
  leaseSeconds: { min: 1, max: INT32_MAX },
} as const;

const SUBSCRIPTION_MODES = new Map<string, SubscriptionMode>([
  ['all', 'all'],
  ['from_beginning', 'all'],
  ['new', 'new'],
  ['new-only', 'new'],
  ['now', 'new'],
]);

/** Reads the pop query string strictly: a value that is present must be valid, or the pop is a 400. */
@Injectable()
export class PopQueryPipe implements PipeTransform<unknown, PopOptions> {
  transform(query: unknown): PopOptions {
    const raw = isPlainObject(query) ? query : {};
    const int = (name: keyof typeof POP_LIMITS) =>
      queryInteger(raw[name], name, POP_LIMITS[name].min, POP_LIMITS[name].max);
    return {
      batch: int('batch') ?? POP_LIMITS.batch.fallback,
      partitions: int('partitions') ?? POP_LIMITS.partitions.fallback,
      wait: queryBoolean(raw.wait, 'wait') ?? false,
      timeoutMs: int('timeout') ?? POP_LIMITS.timeout.fallback,
      leaseSeconds: int('leaseSeconds'),
      consumerGroup: queryName(raw.consumerGroup, 'consumerGroup') ?? QUEUE_MODE_GROUP,
      // `subscriptionFrom=now` is what Queen's clients send for "new messages only".
      subscriptionMode: fromNow(raw.subscriptionFrom) ? 'new' : subscriptionMode(raw.subscriptionMode),
      subscriptionFrom: fromNow(raw.subscriptionFrom) ? undefined : subscriptionFrom(raw.subscriptionFrom),
      autoAck: queryBoolean(raw.autoAck, 'autoAck') ?? false,
    };
  }
}

function fromNow(value: unknown): boolean {
  return typeof value === 'string' && value.toLowerCase() === 'now';
}

/**
 * Unparsable is a 400, not ignored as Queen does: ignoring it would start a
 * new group at the first message, the history its consumer asked not to get.
 */
function subscriptionFrom(value: unknown): string | undefined {
  try {
    return queryTimestamp(value, 'subscriptionFrom');
  } catch {
    throw invalid('subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z');
  }
}

function subscriptionMode(value: unknown): SubscriptionMode {
  if (value === undefined) return 'all';
  const mode = typeof value === 'string' ? SUBSCRIPTION_MODES.get(value.toLowerCase()) : undefined;
  if (!mode) {
    throw invalid(`subscriptionMode must be one of ${[...SUBSCRIPTION_MODES.keys()].join(', ')}`);
  }
  return mode;
}
