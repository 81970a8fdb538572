import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule } from '../../common/contract-validators';

/** Each range a chart can ask for: its span and the step its points are summed over. */
export const HISTORY_RANGES = {
  hour: { seconds: 3_600, stepSeconds: 60 },
  day: { seconds: 86_400, stepSeconds: 300 },
  week: { seconds: 604_800, stepSeconds: 3_600 },
} as const;

export type HistoryRange = keyof typeof HISTORY_RANGES;
const RANGE_NAMES = Object.keys(HISTORY_RANGES) as HistoryRange[];

export class HistoryQueryDto {
  @ApiPropertyOptional({
    enum: RANGE_NAMES,
    default: 'hour',
    description: 'The last hour (60 one-minute points), day (288 of five minutes) or week (168 of an hour)',
  })
  @contractRule('isHistoryRange', (value) =>
    value === undefined || (typeof value === 'string' && Object.hasOwn(HISTORY_RANGES, value))
      ? undefined
      : `must be one of ${RANGE_NAMES.join(', ')}`,
  )
  range: HistoryRange = 'hour';
}

const AT = '2026-12-06T09:41:00.000000Z';

export class HistoryPointDto {
  @ApiProperty({ example: AT, description: "The step's start, by the database clock" })
  at: string;

  @ApiProperty({ type: 'integer', example: 1200, description: 'Messages stored by push (duplicates not counted)' })
  pushed: number;

  @ApiProperty({ type: 'integer', example: 1180, description: 'Messages delivered by pop, redeliveries included' })
  popped: number;

  @ApiProperty({ type: 'integer', example: 1175, description: 'Messages acknowledged as completed or failed' })
  acked: number;

  @ApiProperty({ type: 'integer', example: 2, description: 'Messages moved to dead letters after their retry limit' })
  deadLettered: number;

  @ApiProperty({
    type: 'number',
    nullable: true,
    example: 4.2,
    description:
      'The longest a message delivered in this step had waited since its push, in seconds; null: none delivered',
  })
  maxWaitSeconds: number | null;
}

export class QueueHistoryPointDto extends HistoryPointDto {
  @ApiProperty({
    type: 'integer',
    nullable: true,
    example: 35,
    description:
      "Messages waiting (the furthest-behind group's lag, as the listing's pending) at the step's last activity, " +
      'carried across quiet steps; null before the first one this range shows',
  })
  lag: number | null;
}

class HistorySpanDto {
  @ApiProperty({ enum: RANGE_NAMES, example: 'hour' })
  range: HistoryRange;

  @ApiProperty({ type: 'integer', example: 60, description: 'Seconds each point sums' })
  stepSeconds: number;

  @ApiProperty({ example: '2026-12-06T08:42:00.000000Z', description: "The first point's start" })
  from: string;

  @ApiProperty({
    example: '2026-12-06T09:42:00.000000Z',
    description: "The end of the last point: the current minute's end",
  })
  to: string;
}

export class QueueHistoryDto extends HistorySpanDto {
  @ApiProperty({ example: 'orders' })
  queue: string;

  @ApiProperty({ type: [QueueHistoryPointDto], description: 'One per step, oldest first, quiet steps included' })
  points: QueueHistoryPointDto[];
}

export class TenantHistoryDto extends HistorySpanDto {
  @ApiProperty({
    type: [HistoryPointDto],
    description: "One per step, oldest first: the tenant's queues together, deleted ones included",
  })
  points: HistoryPointDto[];
}
