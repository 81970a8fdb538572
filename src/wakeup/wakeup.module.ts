import { Module } from '@nestjs/common';
import { LeaseExpiryService } from './lease-expiry.service';
import { ParkedPolls } from './parked-polls';
import { Writes } from './writes';
import { WakeupChannel } from './wakeup-channel';
import { WakeupRepository } from './wakeup.repository';

@Module({
  providers: [ParkedPolls, WakeupChannel, WakeupRepository, LeaseExpiryService, Writes],
  exports: [ParkedPolls, WakeupChannel, LeaseExpiryService, Writes],
})
export class WakeupModule {}
