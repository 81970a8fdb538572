import { Global, Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { BrokerRegistry } from '../cluster/broker-registry';
import { BrokersRepository } from '../cluster/brokers.repository';
import { FixedWindowThrottlerStorage } from './fixed-window.storage';
import { HeavyReadInterceptor } from './heavy-read';
import { StoredUsageRepository } from './stored-usage.repository';
import { TenantQuotas } from './tenant-quotas';
import { TenantRates } from './tenant-rates';

@Global()
@Module({
  providers: [
    TenantQuotas,
    StoredUsageRepository,
    BrokerRegistry,
    BrokersRepository,
    FixedWindowThrottlerStorage,
    TenantRates,
    { provide: APP_INTERCEPTOR, useClass: HeavyReadInterceptor },
  ],
  exports: [TenantQuotas, BrokerRegistry, FixedWindowThrottlerStorage, TenantRates],
})
export class LimitsModule {}
