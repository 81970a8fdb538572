import { ApiProperty } from '@nestjs/swagger';

const EXPIRY_DESCRIPTION =
  'The earliest expiry among the renewed leases (UTC, microseconds), or null when nothing was renewed. ' +
  'newExpiresAt, expiresAt and lease_expires_at always hold one identical value: different clients of ' +
  'this API family read different key names.';
const EXAMPLE_EXPIRY = '2026-07-30T11:06:44.512873Z';

export class ExtendLeaseResponseDto {
  @ApiProperty({
    description: 'The lease id from the path, echoed verbatim',
    example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
  })
  leaseId: string;

  @ApiProperty({ description: 'true when renewed > 0. HTTP 200 alone does not mean the lease was extended.' })
  success: boolean;

  @ApiProperty({
    type: 'integer',
    description:
      'How many (partition, consumer group) leases this call extended. 0 means no live lease has this id any ' +
      "more (expired, released by ack or nack, unknown, or another tenant's): stop or abandon the work.",
    example: 1,
  })
  renewed: number;

  @ApiProperty({ type: String, nullable: true, description: EXPIRY_DESCRIPTION, example: EXAMPLE_EXPIRY })
  newExpiresAt: string | null;

  @ApiProperty({ type: String, nullable: true, description: EXPIRY_DESCRIPTION, example: EXAMPLE_EXPIRY })
  expiresAt: string | null;

  @ApiProperty({ type: String, nullable: true, description: EXPIRY_DESCRIPTION, example: EXAMPLE_EXPIRY })
  lease_expires_at: string | null;
}
