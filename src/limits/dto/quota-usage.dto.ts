import { ApiProperty } from '@nestjs/swagger';
import { QuotaKind } from '../tenant-quotas';

const QUOTA_KINDS: QuotaKind[] = ['queues', 'partitions', 'consumerGroups', 'storedBytes', 'storedMessages'];

export class QuotaUseDto {
  @ApiProperty({ enum: QUOTA_KINDS, example: 'storedBytes' })
  quota: QuotaKind;

  @ApiProperty({ example: 'TENANT_MAX_STORED_BYTES', description: 'The setting that sets it' })
  variable: string;

  @ApiProperty({
    type: 'integer',
    nullable: true,
    example: 52428800,
    description:
      'What the tenant uses of it. Queues, partitions and consumer groups are counted up to one past the quota, ' +
      'and not at all (null) when it is off; stored bytes and messages (dead letters included) are always given.',
  })
  used: number | null;

  @ApiProperty({ type: 'integer', nullable: true, example: 10737418240, description: 'null: no quota' })
  limit: number | null;
}

export class QuotaUsageDto {
  @ApiProperty({ type: [QuotaUseDto] })
  quotas: QuotaUseDto[];
}
