import { ApiProperty } from '@nestjs/swagger';

/** No example of its own: each documented status shows the texts sent for it (ApiErrorResponse). */
export class ErrorResponseDto {
  @ApiProperty({ description: 'What went wrong, in a few words; never internals of the broker or the database' })
  error: string;
}
