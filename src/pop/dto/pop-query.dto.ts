import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { ValidateIf } from 'class-validator/cjs/decorator/common/ValidateIf';
import {
  contractRule,
  IsName,
  IsTrueOrFalse,
  ToQueryBoolean,
  ToQueryInteger,
  zonedTimestamp,
} from '../../common/contract-validators';
import { IgnoresKeys } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';
import { QUEUE_MODE_GROUP } from '../../common/queue-mode';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

export type SubscriptionMode = 'all' | 'new';

const SUBSCRIPTION_MODES = new Map<string, SubscriptionMode>([
  ['all', 'all'],
  ['from_beginning', 'all'],
  ['new', 'new'],
  ['new-only', 'new'],
  ['now', 'new'],
]);
const SUBSCRIPTION_MODE_NAMES = [...SUBSCRIPTION_MODES.keys()];

/** `subscriptionFrom=now` is what Queen's clients send for "new messages only". */
export function isNow(value: unknown): boolean {
  return typeof value === 'string' && value.toLowerCase() === 'now';
}

/**
 * Queen's clients send namespace and task on a queue pop too (a discovery pop reads them), and autopilot=true to let
 * the broker size a batch they leave out, which is what leaving it out does here.
 */
@IgnoresKeys('namespace', 'task', 'autopilot')
export class PopQueryDto {
  @IntegerParameter(1, 10_000, {
    default: 200,
    description: 'Most messages in total',
  })
  @ToQueryInteger()
  batch = 200;

  @IntegerParameter(1, 1_000, {
    default: 1,
    description: 'Most partitions claimed',
  })
  @ToQueryInteger()
  partitions = 1;

  @ApiPropertyOptional({ type: 'boolean', default: false, description: 'Long poll for messages or timeout' })
  @ToQueryBoolean()
  @IsTrueOrFalse()
  wait = false;

  @IntegerParameter(0, 600_000, {
    default: 30_000,
    description: 'Long-poll timeout in ms',
  })
  @ToQueryInteger()
  timeout = 30_000;

  @IntegerParameter(1, INT32_MAX, { description: "Default: the queue's leaseTime" })
  @ToQueryInteger()
  leaseSeconds?: number;

  @ApiPropertyOptional({ type: String, default: QUEUE_MODE_GROUP, description: 'The consumer group' })
  @IsName({ inQuery: true })
  consumerGroup = QUEUE_MODE_GROUP;

  @ApiPropertyOptional({
    enum: SUBSCRIPTION_MODE_NAMES,
    default: 'all',
    description: "A new group's starting point, fixed at its first pop: everything (all) or after that pop (new)",
  })
  @Transform(
    ({ value }: { value: unknown }) =>
      typeof value === 'string' ? (SUBSCRIPTION_MODES.get(value.toLowerCase()) ?? value) : value,
    {
      toClassOnly: true,
    },
  )
  // Not read when subscriptionFrom is `now`, so not judged either.
  @ValidateIf((query: PopQueryDto) => !isNow(query.subscriptionFrom))
  @contractRule('isSubscriptionMode', (value) =>
    value === 'all' || value === 'new' ? undefined : `must be one of ${SUBSCRIPTION_MODE_NAMES.join(', ')}`,
  )
  subscriptionMode: SubscriptionMode = 'all';

  @ApiPropertyOptional({
    type: String,
    description:
      'ISO-8601 starting point for a new group, or `now` (the same as subscriptionMode=new); wins over subscriptionMode',
  })
  @Transform(({ value }: { value: unknown }) => (isNow(value) ? value : (zonedTimestamp(value) ?? value)), {
    toClassOnly: true,
  })
  // Unparsable is a 400, not ignored as Queen does: ignoring it would start a
  // new group at the first message, the history its consumer asked not to get.
  @contractRule('isSubscriptionStart', (value) =>
    value === undefined || isNow(value) || zonedTimestamp(value) !== undefined
      ? undefined
      : 'must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
  )
  subscriptionFrom?: string;

  @ApiPropertyOptional({ type: 'boolean', default: false, description: 'Commit on delivery: leaseId null' })
  @ToQueryBoolean()
  @IsTrueOrFalse()
  autoAck = false;
}
