import { Global, Module } from '@nestjs/common';
import { BrokerRegistry } from '../cluster/broker-registry';
import { BrokersRepository } from '../cluster/brokers.repository';
import { PoolSizer } from '../cluster/pool-share';
import { FixedWindowThrottlerStorage } from './fixed-window.storage';
import { HeavyReadInterceptor, HeavyReadPermits } from './heavy-read';
import { QuotaCountsRepository } from './quota-counts.repository';
import { StoredUsageRepository } from './stored-usage.repository';
import { TenantQuotas } from './tenant-quotas';
import { TenantRates } from './tenant-rates';

@Global()
@Module({
  providers: [
    TenantQuotas,
    StoredUsageRepository,
    QuotaCountsRepository,
    BrokerRegistry,
    BrokersRepository,
    PoolSizer,
    FixedWindowThrottlerStorage,
    TenantRates,
    HeavyReadPermits,
    HeavyReadInterceptor,
  ],
  exports: [
    TenantQuotas,
    BrokerRegistry,
    PoolSizer,
    FixedWindowThrottlerStorage,
    TenantRates,
    HeavyReadPermits,
    HeavyReadInterceptor,
  ],
})
export class LimitsModule {}
