import { Module } from '@nestjs/common';
import { LeaseExpiryService } from './lease-expiry.service';
import { WakeupRepository } from './wakeup.repository';
import { WakeupService } from './wakeup.service';

@Module({
  providers: [WakeupService, WakeupRepository, LeaseExpiryService],
  exports: [WakeupService, WakeupRepository, LeaseExpiryService],
})
export class WakeupModule {}
