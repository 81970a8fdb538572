import { Body, Controller, Get, HttpCode, HttpStatus, Injectable, PipeTransform, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Access } from '../auth/access.decorator';
import { TenantId } from '../auth/principal.decorator';
import { ApiDatabaseErrors } from '../common/api-database-errors.decorator';
import { ApiAuthErrors, ApiErrorResponse } from '../common/api-errors.decorator';
import { validateBody } from '../common/dto-validation';
import { AcceptsBody } from '../http/body-limit.decorator';
import { RateLimited } from '../limits/route-class.decorator';
import { MaintenanceStateDto, MaintenanceSwitchDto } from './dto/maintenance.dto';
import { MaintenanceService } from './maintenance.service';

@Injectable()
class SwitchPipe implements PipeTransform<unknown, boolean> {
  transform(body: unknown): boolean {
    return validateBody(MaintenanceSwitchDto, body).enabled;
  }
}

const SCOPE =
  "The switches are the caller's tenant's, and every broker process on the database honours them within a " +
  'second (the one that answered, at once).';

@ApiTags('maintenance')
@ApiBearerAuth()
@ApiAuthErrors('the token has no admin role')
@RateLimited('manage')
@Access('admin')
@Controller('api/v1/system/maintenance')
export class MaintenanceController {
  constructor(private readonly maintenance: MaintenanceService) {}

  @Get(['', 'pop'])
  @ApiOperation({ summary: "The tenant's maintenance switches", description: SCOPE })
  @ApiOkResponse({ type: MaintenanceStateDto })
  @ApiDatabaseErrors('Nothing was changed.')
  state(@TenantId() tenantId: string): Promise<MaintenanceStateDto> {
    return this.maintenance.state(tenantId);
  }

  @Post()
  @HttpCode(HttpStatus.OK)
  @ApiOperation({
    summary: 'Pause or resume pushes',
    description:
      'While paused, a push or a transaction answers 503 {"error": "maintenance: pushes are paused"} with ' +
      'Retry-After: 5, and stores nothing: a producer keeps its messages and retries, so none is lost or stored ' +
      'twice. Pops, acks and lease extensions go on. ' +
      SCOPE,
  })
  @ApiBody({
    type: MaintenanceSwitchDto,
    examples: {
      pause: { summary: 'Pause', value: { enabled: true } },
      resume: { summary: 'Resume', value: { enabled: false } },
    },
  })
  @ApiOkResponse({ type: MaintenanceStateDto })
  @ApiErrorResponse(400, 'enabled is not a boolean; nothing changes', 'enabled must be true or false')
  @AcceptsBody(1024)
  @ApiDatabaseErrors('The switch may or may not have changed: send it again.')
  switchPushes(@TenantId() tenantId: string, @Body(SwitchPipe) enabled: boolean): Promise<MaintenanceStateDto> {
    return this.maintenance.set(tenantId, { pushes: enabled });
  }

  @Post('pop')
  @HttpCode(HttpStatus.OK)
  @ApiOperation({
    summary: 'Pause or resume pops',
    description:
      'While paused, a pop answers 204 without claiming anything; a long poll waits out its timeout (and claims ' +
      'as usual if pops resume meanwhile). Acks and lease extensions go on, so work in hand can finish. ' +
      SCOPE,
  })
  @ApiBody({
    type: MaintenanceSwitchDto,
    examples: {
      pause: { summary: 'Pause', value: { enabled: true } },
      resume: { summary: 'Resume', value: { enabled: false } },
    },
  })
  @ApiOkResponse({ type: MaintenanceStateDto })
  @ApiErrorResponse(400, 'enabled is not a boolean; nothing changes', 'enabled must be true or false')
  @AcceptsBody(1024)
  @ApiDatabaseErrors('The switch may or may not have changed: send it again.')
  switchPops(@TenantId() tenantId: string, @Body(SwitchPipe) enabled: boolean): Promise<MaintenanceStateDto> {
    return this.maintenance.set(tenantId, { pops: enabled });
  }
}
