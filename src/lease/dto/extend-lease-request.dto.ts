import { ApiPropertyOptional } from '@nestjs/swagger';

/** Documents the body only: the route parses it leniently with LenientSecondsPipe. */
export class ExtendLeaseRequestDto {
  @ApiPropertyOptional({
    type: 'integer',
    default: 60,
    minimum: 1,
    example: 120,
    description:
      'How long from now the lease should last. Missing, non-integer or malformed values mean 60; ' +
      'values below 1 mean 1; an operator cap (LEASE_MAX_EXTEND_SECONDS) may lower larger values. ' +
      'A lease is never shortened: the new expiry is the later of the current one and now + seconds.',
  })
  seconds?: number;
}
