import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsTrueOrFalse } from '../common/contract-validators';
import { INT32_MAX } from '../common/input';
import { IntegerParameter } from '../common/integer-parameter.decorator';
import { RetentionRow, StoredRetention } from '../retention/retention-policy';

/** The columns of `queues` that hold its options; a retention one holds null for the broker's default. */
export interface QueueOptionRow extends RetentionRow {
  lease_time: number;
  retry_limit: number;
  dead_letter_queue: boolean;
  dlq_after_max_retries: boolean;
  retry_delay_ms: number;
  delayed_processing: number;
  window_buffer: number;
  priority: number;
  encryption_enabled: boolean;
}

type Column = keyof QueueOptionRow;
type Resettable<C extends Column> = null extends QueueOptionRow[C] ? true : false;

/** A nullable column is a retention option: null resets it to the broker's default, so it has no default of its own. */
type Declaration<C extends Column> = {
  /** Its name in configure's options and in every answer showing options. */
  key: Resettable<C> extends true ? keyof StoredRetention : string;
  description: string;
  /** In every queue's listed options; the others are listed once they differ from their default. */
  alwaysListed?: true;
} & (NonNullable<QueueOptionRow[C]> extends number ? { min: number; max: number } : unknown) &
  (Resettable<C> extends true ? unknown : { default: NonNullable<QueueOptionRow[C]> });

/**
 * The one declaration of a queue's options, in the order Swagger shows them and validation reports the first
 * problem. Typed against QueueOptionRow, so a column added there and not here does not compile. It drives the
 * configure body's rules and schema, the one UPDATE of the queue row, and the options echoed in answers.
 */
const DECLARED: { [C in Column]: Declaration<C> } = {
  lease_time: {
    key: 'leaseTime',
    min: 1,
    max: INT32_MAX,
    default: 60,
    alwaysListed: true,
    description: 'Default leaseSeconds of a pop',
  },
  retry_limit: {
    key: 'retryLimit',
    min: 0,
    max: INT32_MAX,
    default: 3,
    alwaysListed: true,
    description: 'Failures redelivered before the next failure dead-letters the message',
  },
  dead_letter_queue: {
    key: 'deadLetterQueue',
    default: true,
    alwaysListed: true,
    description: 'Keep messages that use up their retries in the dead-letter queue; false drops them',
  },
  dlq_after_max_retries: {
    key: 'dlqAfterMaxRetries',
    default: false,
    description:
      "Queen's name for keeping the messages that use up their retries as dead letters: they are kept when this or " +
      'deadLetterQueue is true, dropped when both are false',
  },
  retry_delay_ms: {
    key: 'retryDelay',
    min: 0,
    max: INT32_MAX,
    default: 0,
    description:
      'Milliseconds after a nack (failed or retry) or an expired lease before the partition is offered to that ' +
      'consumer group again, so a failing message is not retried at once; a poll parked meanwhile gets it when the ' +
      'delay has passed',
  },
  delayed_processing: {
    key: 'delayedProcessing',
    min: 0,
    max: INT32_MAX,
    default: 0,
    description:
      'Seconds after its push before a message can be popped; a poll parked meanwhile gets it when it comes due',
  },
  window_buffer: {
    key: 'windowBuffer',
    min: 0,
    max: INT32_MAX,
    default: 0,
    description:
      'Seconds a partition must be quiet (its newest message that old) before it is handed out, so a burst is ' +
      'delivered together',
  },
  priority: {
    key: 'priority',
    min: -INT32_MAX,
    max: INT32_MAX,
    default: 0,
    description: 'Order in which a discovery pop (GET /api/v1/pop) serves the queues it matches, highest first',
  },
  completed_retention_seconds: {
    key: 'completedRetentionSeconds',
    min: 0,
    max: INT32_MAX,
    description:
      'Seconds a message is kept once every consumer group of its partition has moved past it (acked or ' +
      "dead-lettered). 0 keeps such messages; null (or never set) means the broker's COMPLETED_RETENTION_SECONDS " +
      '(3600). Also how far back a group that starts later, or seeks, can read.',
  },
  retention_enabled: {
    key: 'retentionEnabled',
    description:
      'false keeps messages that nobody consumed, whatever retentionSeconds says; true or null applies ' +
      'retentionSeconds (or the broker default).',
  },
  retention_seconds: {
    key: 'retentionSeconds',
    min: 0,
    max: INT32_MAX,
    description:
      'Seconds after which a message is deleted even if nobody consumed it, as SQS does. 0 keeps them; null ' +
      "(or never set) means the broker's RETENTION_SECONDS (14 days). A message under a live lease goes when " +
      'the lease ends.',
  },
  max_wait_time_seconds: {
    key: 'maxWaitTimeSeconds',
    min: 0,
    max: INT32_MAX,
    description:
      'Seconds a message may wait for a consumer group: older, it is dead-lettered for each group that has not ' +
      'consumed it (when deadLetterQueue is on) and removed. 0 or null: no limit.',
  },
  ttl_seconds: {
    key: 'ttl',
    min: 0,
    max: INT32_MAX,
    description:
      "Queen's time to live, in seconds from the push: a message a consumer group has not consumed by then leaves " +
      'the queue as maxWaitTimeSeconds evicts it (a dead letter for that group when the queue keeps them), counted ' +
      'in leasehold_retention_deleted_total{reason="evicted"}. With both set, the shorter applies. 0 or null: none.',
  },
  max_size: {
    key: 'maxSize',
    min: 0,
    max: INT32_MAX,
    description:
      'Most messages the queue may hold that its slowest consumer group has not consumed; a push past it ' +
      'stores what fits and answers the rest `failed` with error `queue is full`. 0 or null: no limit.',
  },
  dlq_retention_seconds: {
    key: 'dlqRetentionSeconds',
    min: 0,
    max: INT32_MAX,
    description:
      "Seconds a dead letter is kept. 0 keeps them; null (or never set) means the broker's DLQ_RETENTION_SECONDS " +
      '(14 days).',
  },
  encryption_enabled: {
    key: 'encryptionEnabled',
    default: false,
    description:
      'Store the payloads of messages pushed from now on encrypted (AES-256-GCM, under the key ENCRYPTION_KEYS ' +
      'or QUEEN_ENCRYPTION_KEY names); pops and listings answer them decrypted. Messages already stored keep how ' +
      'they were stored, either way. true needs a key configured on the broker (else 400).',
  },
};

export type OptionValue = number | boolean;

export interface QueueOption {
  key: string;
  column: Column;
  type: 'integer' | 'boolean';
  /** Integers only. */
  min?: number;
  max?: number;
  /** Undefined for a retention option: null stores its absence, the broker's default. */
  default: OptionValue | undefined;
  retention: boolean;
  alwaysListed: boolean;
  description: string;
}

export const QUEUE_OPTIONS: readonly QueueOption[] = Object.entries(DECLARED).map(
  ([column, declared]: [string, { key: string; description: string; alwaysListed?: true }]) => {
    const { min, max, default: fallback } = declared as { min?: number; max?: number; default?: OptionValue };
    return {
      key: declared.key,
      column: column as Column,
      type: min === undefined ? 'boolean' : 'integer',
      min,
      max,
      default: fallback,
      retention: !('default' in declared),
      alwaysListed: declared.alwaysListed === true,
      description: declared.description,
    };
  },
);

export type RetentionOption = keyof StoredRetention;
export type RetentionSettings = Partial<Record<RetentionOption, OptionValue | null>>;

export const RETENTION_OPTIONS = QUEUE_OPTIONS.filter((option) => option.retention).map(
  (option) => option.key as RetentionOption,
);

/** Options as configure received them: only those sent, a retention one possibly null. */
export type SentOptions = Partial<Record<string, OptionValue | null>>;

/** A queue's options as its row holds them, by key; a retention one is null while the broker's default applies. */
export type StoredOptions = Record<string, OptionValue | null>;

/** The rule and the Swagger schema of one option; null is refused except where it resets a retention option. */
export function optionProperty(option: QueueOption): PropertyDecorator {
  const nullable = option.retention ? { nullable: true } : { default: option.default };
  if (option.type === 'integer') {
    return IntegerParameter(option.min!, option.max!, {
      ...nullable,
      description: option.description,
      nullMeansAbsent: option.retention,
    });
  }
  const property = ApiPropertyOptional({ type: Boolean, ...nullable, description: option.description });
  const rule = IsTrueOrFalse({ nullMeansAbsent: option.retention });
  return (target, key) => {
    property(target, key);
    rule(target, key);
  };
}

export function sentOptionsOf(body: Record<string, unknown>): SentOptions {
  const sent: SentOptions = {};
  for (const { key } of QUEUE_OPTIONS) {
    if (body[key] !== undefined) sent[key] = body[key] as OptionValue | null;
  }
  return sent;
}

export function retentionSettingsOf(sent: SentOptions): RetentionSettings {
  return Object.fromEntries(RETENTION_OPTIONS.filter((key) => sent[key] !== undefined).map((key) => [key, sent[key]]));
}

export function storedOptionsOf(row: QueueOptionRow): StoredOptions {
  return Object.fromEntries(QUEUE_OPTIONS.map((option) => [option.key, row[option.column]]));
}

export const optionColumns = (alias: string): string =>
  QUEUE_OPTIONS.map((option) => `${alias}.${option.column}`).join(', ');

/** Every option with the value in force: a retention one's comes from the retention policy (retentionInForce). */
export function optionsInForce(
  stored: StoredOptions,
  retentionInForce: Record<RetentionOption, OptionValue>,
): Record<string, OptionValue> {
  return Object.fromEntries(
    QUEUE_OPTIONS.map((option) => [
      option.key,
      option.retention ? retentionInForce[option.key as RetentionOption] : (stored[option.key] as OptionValue),
    ]),
  );
}

/**
 * The options a queue's listing shows: `extra` (stored before the broker refused options it does not honour) first,
 * then each option that is always listed or differs from its default, with the value in force. The retention ones are
 * listed together, in the order retentionInForce has them.
 */
export function listedOptions(
  stored: StoredOptions,
  retentionInForce: Record<RetentionOption, OptionValue>,
  extra: Record<string, unknown>,
): Record<string, unknown> {
  const listed: Record<string, unknown> = { ...extra };
  let retentionListed = false;
  for (const option of QUEUE_OPTIONS) {
    if (!option.retention) {
      if (option.alwaysListed || stored[option.key] !== option.default) listed[option.key] = stored[option.key];
    } else if (!retentionListed) {
      retentionListed = true;
      for (const [key, value] of Object.entries(retentionInForce)) if (stored[key] !== null) listed[key] = value;
    }
  }
  return listed;
}
