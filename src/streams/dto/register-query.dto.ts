import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, IsName, IsTrueOrFalse } from '../../common/contract-validators';

export const CONFIG_HASH_MAX_LENGTH = 256;

const IsConfigHash = () =>
  contractRule('isConfigHash', (value) => {
    if (value === undefined || value === null) return 'is required';
    if (typeof value !== 'string') return 'must be a string';
    if (value.length === 0 || value.length > CONFIG_HASH_MAX_LENGTH) {
      return `must be 1 to ${CONFIG_HASH_MAX_LENGTH} characters long`;
    }
    return /^[\x21-\x7e]+$/.test(value) ? undefined : 'must be printable ASCII';
  });

export class RegisterQueryDto {
  @ApiProperty({ example: 'orders.per_customer_per_min', description: "The SDK's queryId: one query per name" })
  @IsName()
  name: string;

  @ApiProperty({ example: 'orders', description: 'The queue the query reads; created when missing' })
  @IsName()
  source_queue: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    example: 'orders.totals_per_customer_per_min',
    description: 'Where its cycles push, as the SDK names it; recorded, not created',
  })
  @IsName({ optional: true })
  sink_queue?: string | null;

  @ApiProperty({
    example: '9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a',
    description: "The SDK's fingerprint of the operator chain",
  })
  @IsConfigHash()
  config_hash: string;

  @ApiPropertyOptional({
    default: false,
    description: 'With a config_hash other than the one stored: delete the query state and take the new hash',
  })
  @IsTrueOrFalse({ nullMeansAbsent: true })
  reset?: boolean | null;
}

export class RegisterQueryResponseDto {
  @ApiProperty({ example: true })
  success: boolean;

  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90', description: 'The id cycles and state reads name' })
  query_id: string;

  @ApiProperty({ example: 'orders.per_customer_per_min' })
  name: string;

  @ApiProperty({ example: '9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a' })
  config_hash: string;

  @ApiProperty({ description: 'The query was registered by this request' })
  fresh: boolean;

  @ApiProperty({ description: "The query's state was deleted by this request (reset with another config_hash)" })
  reset: boolean;
}

export class StreamQueryDto {
  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' })
  query_id: string;

  @ApiProperty({ example: 'orders.per_customer_per_min' })
  name: string;

  @ApiProperty({ example: 'orders' })
  source_queue: string;

  @ApiProperty({ type: String, nullable: true, example: 'orders.totals_per_customer_per_min' })
  sink_queue: string | null;

  @ApiProperty({ example: '9f2c4e1a7b3d5c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a' })
  config_hash: string;

  @ApiProperty({ example: '2026-12-06T01:02:03.456Z' })
  created_at: string;

  @ApiProperty({ example: '2026-12-06T01:02:03.456Z' })
  updated_at: string;
}

export class StreamQueryListDto {
  @ApiProperty({ type: [StreamQueryDto] })
  queries: StreamQueryDto[];
}
