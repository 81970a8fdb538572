import { ApiProperty } from '@nestjs/swagger';
import { ToQueryInteger } from '../../common/contract-validators';
import { IntegerParameter } from '../../common/integer-parameter.decorator';

const TIMESTAMP = '2026-07-30T11:06:44.512873Z';

/** The characters of a lease id a listing shows: enough for its holder to recognise it, far too few to use it. */
export const LEASE_HINT_CHARS = 4;

export class LiveLeaseDto {
  @ApiProperty({ example: '__QUEUE_MODE__' })
  consumerGroup: string;

  @ApiProperty()
  partitionId: string;

  @ApiProperty({ example: 'Default' })
  partition: string;

  @ApiProperty({
    example: '…9f3c',
    description: `The lease id's last ${LEASE_HINT_CHARS} characters; the id itself is never shown, since it extends and acks`,
  })
  leaseIdHint: string;

  @ApiProperty({ type: 'integer', description: 'Fencing token of this claim' })
  epoch: number;

  @ApiProperty({ type: 'integer', description: 'Messages under the lease' })
  messages: number;

  @ApiProperty({ type: 'integer' })
  deliveryAttempt: number;

  @ApiProperty({ example: TIMESTAMP })
  expiresAt: string;

  @ApiProperty({ type: 'integer', description: 'Milliseconds left, by the database clock at `now`' })
  remainingMs: number;

  @ApiProperty({
    type: String,
    nullable: true,
    example: TIMESTAMP,
    description: 'Latest it may be extended to (LEASE_MAX_TOTAL_SECONDS); null without a ceiling',
  })
  deadline: string | null;

  @ApiProperty({ type: 'integer', description: 'Renewals of this claim' })
  renewals: number;

  @ApiProperty({ type: String, nullable: true, example: TIMESTAMP })
  lastRenewedAt: string | null;

  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: 'Milliseconds the lease had left when last renewed: near 0, the holder renews too late',
  })
  lastRenewalSlackMs: number | null;
}

export class LeaseListDto {
  @ApiProperty({ example: TIMESTAMP, description: 'The database clock the answer was read at' })
  now: string;

  @ApiProperty({ type: [LiveLeaseDto], description: 'Live leases, the soonest to expire first' })
  leases: LiveLeaseDto[];

  @ApiProperty({ description: 'More live leases exist than the limit let through' })
  truncated: boolean;
}

export const LEASE_LIST_MAX = 1_000;

export class LeaseListQueryDto {
  @IntegerParameter(1, LEASE_LIST_MAX, { default: 200 })
  @ToQueryInteger()
  limit = 200;
}
