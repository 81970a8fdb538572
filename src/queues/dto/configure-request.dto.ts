import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { QueueSettings } from '../queues.repository';

/** A configure request as validated by ConfigureRequestPipe. */
export interface ConfigureCommand {
  queue: string;
  settings: QueueSettings;
  /** Option names in the order they were sent: the answer echoes exactly these. */
  sent: string[];
}

export class QueueOptionsDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, default: 60, description: 'Default leaseSeconds of a pop' })
  leaseTime?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    default: 3,
    description: 'Failures redelivered before the next failure dead-letters the message',
  })
  retryLimit?: number;

  @ApiPropertyOptional({
    default: true,
    description: 'Keep messages that use up their retries in the dead-letter queue; false drops them',
  })
  deadLetterQueue?: boolean;
}

export class ConfigureRequestDto {
  @ApiProperty({ example: 'orders', description: 'Created when missing' })
  queue: string;

  @ApiPropertyOptional({
    type: QueueOptionsDto,
    description: 'Options to set; others keep their value. Unknown options are stored and echoed, not interpreted.',
  })
  options?: QueueOptionsDto & Record<string, unknown>;
}
