import { Global, Module } from '@nestjs/common';
import { BrokerRegistry } from '../cluster/broker-registry';
import { BrokersRepository } from '../cluster/brokers.repository';
import { TenantQuotas } from './tenant-quotas';

@Global()
@Module({
  providers: [TenantQuotas, BrokerRegistry, BrokersRepository],
  exports: [TenantQuotas, BrokerRegistry],
})
export class LimitsModule {}
