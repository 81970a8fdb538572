import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { ErrorResponseDto } from '../common/error-response.dto';
import { HealthService, HealthStatus } from './health.service';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly healthService: HealthService) {}

  @Get()
  @Access('public')
  @ApiOperation({ summary: 'Liveness with a database round trip' })
  @ApiOkResponse({ description: 'The database answered', schema: { example: { status: 'ok', database: 'up' } } })
  @ApiServiceUnavailableResponse({ type: ErrorResponseDto, description: 'The database could not be reached' })
  check(): Promise<HealthStatus> {
    return this.healthService.check();
  }
}
