import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  contractRule,
  IsIntegerBetween,
  IsName,
  IsTrueOrFalse,
  nameProblem,
  Problem,
} from '../../common/contract-validators';
import { declaredProperties, IsObjectOf } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';
import { KEY_TOLERANCE, nearMiss } from '../../common/near-miss';
import { QueueSettings } from '../queues.repository';

export const CONFIGURE_BODY_MAX_BYTES = 256 * 1024;

export interface ConfigureCommand {
  queue: string;
  settings: QueueSettings;
  /** Option names in the order they were sent: the answer echoes exactly these. */
  sent: string[];
}

export class QueueOptionsDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, default: 60, description: 'Default leaseSeconds of a pop' })
  @IsIntegerBetween(1, INT32_MAX)
  leaseTime?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    default: 3,
    description: 'Failures redelivered before the next failure dead-letters the message',
  })
  @IsIntegerBetween(0, INT32_MAX)
  retryLimit?: number;

  @ApiPropertyOptional({
    default: true,
    description: 'Keep messages that use up their retries in the dead-letter queue; false drops them',
  })
  @IsTrueOrFalse()
  deadLetterQueue?: boolean;

  @ApiPropertyOptional({
    default: false,
    description:
      "Queen's name for keeping the messages that use up their retries as dead letters: they are kept when this or " +
      'deadLetterQueue is true, dropped when both are false',
  })
  @IsTrueOrFalse()
  dlqAfterMaxRetries?: boolean;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    default: 0,
    description:
      'Milliseconds after a nack (failed or retry) or an expired lease before the partition is offered to that ' +
      'consumer group again, so a failing message is not retried at once; a poll parked meanwhile gets it when the ' +
      'delay has passed',
  })
  @IsIntegerBetween(0, INT32_MAX)
  retryDelay?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    default: 0,
    description:
      'Seconds after its push before a message can be popped; a poll parked meanwhile gets it when it comes due',
  })
  @IsIntegerBetween(0, INT32_MAX)
  delayedProcessing?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    default: 0,
    description:
      'Seconds a partition must be quiet (its newest message that old) before it is handed out, so a burst is ' +
      'delivered together',
  })
  @IsIntegerBetween(0, INT32_MAX)
  windowBuffer?: number;

  @ApiPropertyOptional({
    type: 'integer',
    default: 0,
    description: 'Order in which a discovery pop (GET /api/v1/pop) serves the queues it matches, highest first',
  })
  @IsIntegerBetween(-INT32_MAX, INT32_MAX)
  priority?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      'Seconds a message is kept once every consumer group of its partition has moved past it (acked or ' +
      "dead-lettered). 0 keeps such messages; null (or never set) means the broker's COMPLETED_RETENTION_SECONDS " +
      '(3600). Also how far back a group that starts later, or seeks, can read.',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  completedRetentionSeconds?: number | null;

  @ApiPropertyOptional({
    nullable: true,
    description:
      'false keeps messages that nobody consumed, whatever retentionSeconds says; true or null applies ' +
      'retentionSeconds (or the broker default).',
  })
  @IsTrueOrFalse({ nullMeansAbsent: true })
  retentionEnabled?: boolean | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      'Seconds after which a message is deleted even if nobody consumed it, as SQS does. 0 keeps them; null ' +
      "(or never set) means the broker's RETENTION_SECONDS (14 days). A message under a live lease goes when " +
      'the lease ends.',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  retentionSeconds?: number | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      'Seconds a message may wait for a consumer group: older, it is dead-lettered for each group that has not ' +
      'consumed it (when deadLetterQueue is on) and removed. 0 or null: no limit.',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  maxWaitTimeSeconds?: number | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      "Queen's time to live, in seconds from the push: a message a consumer group has not consumed by then leaves " +
      'the queue as maxWaitTimeSeconds evicts it (a dead letter for that group when the queue keeps them), counted ' +
      'in leasehold_retention_deleted_total{reason="evicted"}. With both set, the shorter applies. 0 or null: none.',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  ttl?: number | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      'Most messages the queue may hold that its slowest consumer group has not consumed; a push past it ' +
      'stores what fits and answers the rest `failed` with error `queue is full`. 0 or null: no limit.',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  maxSize?: number | null;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    nullable: true,
    description:
      "Seconds a dead letter is kept. 0 keeps them; null (or never set) means the broker's DLQ_RETENTION_SECONDS " +
      '(14 days).',
  })
  @IsIntegerBetween(0, INT32_MAX, { nullMeansAbsent: true })
  dlqRetentionSeconds?: number | null;

  @ApiPropertyOptional({
    default: false,
    description:
      'Store the payloads of messages pushed from now on encrypted (AES-256-GCM, under the key ENCRYPTION_KEYS ' +
      'or QUEEN_ENCRYPTION_KEY names); pops and listings answer them decrypted. Messages already stored keep how ' +
      'they were stored, either way. true needs a key configured on the broker (else 400).',
  })
  @IsTrueOrFalse()
  encryptionEnabled?: boolean;
}

/** The retention options: stored in columns of their own, null meaning the broker's default. */
export const RETENTION_OPTIONS = [
  'completedRetentionSeconds',
  'retentionEnabled',
  'retentionSeconds',
  'maxWaitTimeSeconds',
  'maxSize',
  'dlqRetentionSeconds',
  'ttl',
] as const;

export type RetentionOption = (typeof RETENTION_OPTIONS)[number];
export type RetentionSettings = Partial<Record<RetentionOption, number | boolean | null>>;

const PRINTABLE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** Any option the broker would not honour is refused by name, rather than stored and ignored. */
function unsupportedOptionProblem(undeclared: Record<string, unknown>): Problem {
  const [name] = Object.keys(undeclared);
  if (name === undefined) return undefined;
  if (!PRINTABLE_NAME.test(name)) return 'contain an option name that is not supported';
  const guess = nearMiss(name, declaredProperties(QueueOptionsDto), KEY_TOLERANCE);
  return `.${name} is not a supported option${guess === undefined ? '' : `; did you mean "${guess}"?`}`;
}

/** A namespace or task: a name, "" to remove it, null or absent to keep it. */
const IsGroupingName = () =>
  contractRule('isGroupingName', (value) =>
    value === undefined || value === null || value === '' ? undefined : nameProblem(value),
  );

export class ConfigureRequestDto {
  @ApiProperty({ example: 'orders', description: 'Created when missing' })
  @IsName()
  queue: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    example: 'billing',
    description: 'What a discovery pop matches the queue by; null or absent keeps it, "" removes it',
  })
  @IsGroupingName()
  namespace?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true, example: 'invoices', description: 'As namespace' })
  @IsGroupingName()
  task?: string | null;

  @ApiPropertyOptional({
    type: QueueOptionsDto,
    description: 'Options to set; others keep their value. An option the broker does not implement is refused by name.',
  })
  @IsObjectOf(() => QueueOptionsDto, { rest: unsupportedOptionProblem })
  options?: (QueueOptionsDto & Record<string, unknown>) | null;
}
