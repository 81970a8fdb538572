import { Global, Module } from '@nestjs/common';
import { TenantQuotas } from './tenant-quotas';

@Global()
@Module({ providers: [TenantQuotas], exports: [TenantQuotas] })
export class LimitsModule {}
