import { ApiPropertyOptional } from '@nestjs/swagger';
import { contractRule, zonedTimestamp } from '../../common/contract-validators';

export const SEEK_BODY_MAX_BYTES = 1024;

/** Exactly one of the two. */
export class SeekRequestDto {
  @ApiPropertyOptional({ enum: [true], description: 'Move past the last message: the group skips everything stored' })
  @contractRule('isSeekTarget', (value, object) => {
    const timestamp = (object as SeekRequestDto).timestamp;
    if (value === undefined && timestamp === undefined) return 'must be true, or a timestamp must be given';
    if (value !== undefined && timestamp !== undefined) return 'and timestamp cannot both be given';
    if (value !== undefined && value !== true) return 'must be true';
    return undefined;
  })
  toEnd?: true;

  @ApiPropertyOptional({
    type: String,
    example: '2026-07-30T10:00:00Z',
    description:
      'ISO-8601 (UTC when it has no offset): move to just before the first message created at or after it, ' +
      'so those messages are delivered again',
  })
  @contractRule('isSeekTimestamp', (value) =>
    value === undefined || zonedTimestamp(value) !== undefined ? undefined : 'must be an ISO-8601 timestamp',
  )
  timestamp?: string;
}
