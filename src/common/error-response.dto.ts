import { ApiProperty } from '@nestjs/swagger';

/** The shape of every error the broker produces itself. */
export class ErrorResponseDto {
  @ApiProperty({ example: 'Insufficient permissions' })
  error: string;
}
