import { ApiProperty } from '@nestjs/swagger';
import { contractRule } from '../../common/contract-validators';

export class MaintenanceSwitchDto {
  @ApiProperty({ example: true })
  @contractRule('isSwitch', (value) => (typeof value === 'boolean' ? undefined : 'must be true or false'))
  enabled: boolean;
}

export class MaintenanceStateDto {
  @ApiProperty({ description: "Whether the tenant's pushes (and transactions) are refused with 503" })
  maintenanceMode: boolean;

  @ApiProperty({ description: "Whether the tenant's pops answer 204 without claiming" })
  popMaintenanceMode: boolean;
}
