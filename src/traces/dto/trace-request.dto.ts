import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  contractRule,
  IsName,
  IsUuidText,
  nameProblem,
  Problem,
  storableJsonProblem,
  tooLarge,
} from '../../common/contract-validators';

/** Traces annotate a message; their data is a note, not a second payload. */
export const TRACE_DATA_MAX_BYTES = 16 * 1024;
export const TRACE_NAMES_MAX = 20;
/** Data at its limit written with JSON escapes, and every name at its longest, fit. */
export const TRACE_BODY_MAX_BYTES = 128 * 1024;
/** What a message's traces may add up to: its trace listing stays a bounded answer. */
export const TRACES_PER_MESSAGE_MAX = 100;

export interface TraceCommand {
  transactionId: string;
  partitionId: string;
  dataJson: string;
  consumerGroup: string;
  eventType: string;
  traceNames: string[];
}

export function traceDataProblem(value: unknown): Problem {
  if (value === undefined || value === null) return 'is required';
  const json = JSON.stringify(value);
  return storableJsonProblem(json) ?? tooLarge(Buffer.byteLength(json), TRACE_DATA_MAX_BYTES);
}

/** An array of names, or one name (Queen's client wraps it). */
export function traceNamesProblem(value: unknown): Problem {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) {
    return typeof value === 'string' ? nameProblem(value) : 'must be an array of names or a name';
  }
  if (value.length > TRACE_NAMES_MAX) return `must hold at most ${TRACE_NAMES_MAX} names`;
  for (const [index, name] of value.entries()) {
    const problem = nameProblem(name);
    if (problem !== undefined) return `[${index}] ${problem}`;
  }
  return undefined;
}

export class TraceRequestDto {
  @ApiProperty({ description: 'transactionId of the traced message', example: 'order-42-created' })
  @IsName()
  transactionId: string;

  @ApiProperty({
    description: 'partitionId of the traced message, from the pop',
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
  })
  @IsUuidText()
  partitionId: string;

  @ApiProperty({
    description: `Any JSON value but null, at most ${TRACE_DATA_MAX_BYTES} bytes as JSON text`,
    example: { text: 'charged the card', amount: 42 },
  })
  @contractRule('isTraceData', traceDataProblem)
  data: unknown;

  @ApiPropertyOptional({ type: String, default: '__QUEUE_MODE__', description: 'The group whose worker traces' })
  @IsName({ optional: true })
  consumerGroup?: string | null;

  @ApiPropertyOptional({ type: String, default: 'info', example: 'processing', description: 'A label of your own' })
  @IsName({ optional: true })
  eventType?: string | null;

  @ApiPropertyOptional({
    oneOf: [{ type: 'array', items: { type: 'string' }, maxItems: TRACE_NAMES_MAX }, { type: 'string' }],
    example: ['order-42', 'checkout'],
    description:
      `Names to find the trace by (GET /api/v1/traces/by-name/:name), at most ${TRACE_NAMES_MAX}, each 1 to 255 ` +
      'characters; one name may be given as a string. A name given twice counts once.',
  })
  @contractRule('isTraceNames', traceNamesProblem)
  traceNames?: string[] | string | null;
}

export class TraceCreatedDto {
  @ApiProperty({ example: true })
  success: true;

  @ApiProperty({ description: 'Id of the trace (UUIDv7)', example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a95' })
  traceId: string;
}
