import { ApiProperty } from '@nestjs/swagger';

export class AckResultDto {
  @ApiProperty({ type: 'integer', description: 'Position in the request', example: 0 })
  index: number;

  @ApiProperty({ example: 'order-42-created' })
  transactionId: string;

  @ApiProperty({ description: 'Whether the acknowledgment was applied' })
  success: boolean;

  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Why not, e.g. "invalid or expired lease"; null on success',
  })
  error: string | null;

  @ApiProperty({ description: 'This acknowledgment ended a live lease (whole batch committed, or a failure)' })
  leaseReleased: boolean;

  @ApiProperty({ description: 'The message went to the dead-letter queue' })
  dlq: boolean;
}
