import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  IsIntegerBetween,
  IsName,
  IsTrueOrFalse,
  Problem,
  storableJsonProblem,
  tooLarge,
} from '../../common/contract-validators';
import { IsObjectOf } from '../../common/dto-validation';
import { INT32_MAX } from '../../common/input';
import { QueueSettings } from '../queues.repository';

/** Options are echoed by configure and listed by resources: they stay small. */
export const QUEUE_OPTIONS_MAX_BYTES = 64 * 1024;
/** The options and their envelope, with room for JSON's escapes. */
export const CONFIGURE_BODY_MAX_BYTES = 4 * QUEUE_OPTIONS_MAX_BYTES;

/** A configure request as ConfigureRequestPipe hands it to the service. */
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
}

/** Unknown options are stored as JSON and echoed: storable, and within QUEUE_OPTIONS_MAX_BYTES. */
function extraOptionsProblem(extra: Record<string, unknown>): Problem {
  const json = JSON.stringify(extra);
  return storableJsonProblem(json) ?? tooLarge(Buffer.byteLength(json), QUEUE_OPTIONS_MAX_BYTES, 'are');
}

export class ConfigureRequestDto {
  @ApiProperty({ example: 'orders', description: 'Created when missing' })
  @IsName()
  queue: string;

  @ApiPropertyOptional({
    type: QueueOptionsDto,
    description: 'Options to set; others keep their value. Unknown options are stored and echoed, not interpreted.',
  })
  @IsObjectOf(() => QueueOptionsDto, { rest: extraOptionsProblem })
  options?: (QueueOptionsDto & Record<string, unknown>) | null;
}
