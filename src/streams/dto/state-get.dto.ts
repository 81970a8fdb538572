import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, IsUuidText } from '../../common/contract-validators';
import { STATE_KEY_MAX_LENGTH, stateKeyProblem } from './cycle.dto';

export const MAX_STATE_KEYS = 10_000;
/** The rows one read answers at most: a partition's state is one worker's working set, not a table dump. */
export const MAX_STATE_ROWS = 10_000;

const IsStateKeys = () =>
  contractRule('isStateKeys', (value) => {
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value)) return 'must be an array';
    if (value.length > MAX_STATE_KEYS) return `may hold at most ${MAX_STATE_KEYS} keys`;
    for (let index = 0; index < value.length; index += 1) {
      const problem = stateKeyProblem(value[index]);
      if (problem !== undefined) return `[${index}] ${problem}`;
    }
    return undefined;
  });

const IsKeyPrefix = () =>
  contractRule('isKeyPrefix', (value) =>
    value === undefined || value === null || value === '' ? undefined : stateKeyProblem(value),
  );

const IsEpochMs = () =>
  contractRule('isEpochMs', (value) =>
    value === undefined || value === null || (typeof value === 'number' && Number.isFinite(value))
      ? undefined
      : 'must be a number (milliseconds since the epoch)',
  );

export class StateGetDto {
  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  @IsUuidText()
  query_id: string;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a92' })
  @IsUuidText()
  partition_id: string;

  @ApiPropertyOptional({ type: [String], maxItems: MAX_STATE_KEYS, description: 'These keys only; empty: all' })
  @IsStateKeys()
  keys?: string[] | null;

  @ApiPropertyOptional({ maxLength: STATE_KEY_MAX_LENGTH, description: 'Keys starting with this only' })
  @IsKeyPrefix()
  key_prefix?: string | null;

  @ApiPropertyOptional({
    description: "Rows whose value's windowEnd (a number, ms since the epoch) is at or before this only",
    example: 1796518860000,
  })
  @IsEpochMs()
  ripe_at_or_before?: number | null;
}

export class StateRowDto {
  @ApiProperty({ example: 'tumb:60\u001fcustomer-7\u001f2026-12-06T01:00:00.000Z' })
  key: string;

  @ApiProperty({ example: { acc: 42, windowStart: 1796518800000, windowEnd: 1796518860000 } })
  value: unknown;

  @ApiProperty({ example: '2026-12-06T01:00:59.123Z' })
  updated_at: string;
}

export class StateGetResponseDto {
  @ApiProperty({ example: true })
  success: boolean;

  @ApiProperty({ type: [StateRowDto], description: `In key order, at most ${MAX_STATE_ROWS}` })
  rows: StateRowDto[];

  @ApiProperty({ description: `More rows matched than the ${MAX_STATE_ROWS} answered` })
  truncated: boolean;
}
