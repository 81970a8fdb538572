import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, IsName, nameProblem, Problem } from '../../common/contract-validators';
import { declaredProperties, IsObjectOf } from '../../common/dto-validation';
import { KEY_TOLERANCE, nearMiss } from '../../common/near-miss';
import { QueueSettings } from '../queues.repository';
import { optionProperty, QUEUE_OPTIONS, SentOptions } from '../queue-options';

export const CONFIGURE_BODY_MAX_BYTES = 256 * 1024;

export interface ConfigureCommand {
  queue: string;
  settings: QueueSettings;
  /** Option names in the order they were sent: the answer echoes exactly these. */
  sent: string[];
}

/** Swagger's view and the rules of QUEUE_OPTIONS: one property per option, in its order. */
export class QueueOptionsDto {}
for (const option of QUEUE_OPTIONS) optionProperty(option)(QueueOptionsDto.prototype, option.key);

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
  options?: SentOptions | null;
}
