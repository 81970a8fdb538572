import { Module } from '@nestjs/common';
import { WakeupModule } from '../wakeup/wakeup.module';
import { AckController } from './ack.controller';
import { AckRepository } from './ack.repository';
import { AckService } from './ack.service';
import { HandedOutLeases } from './handed-out-leases';

@Module({
  imports: [WakeupModule],
  controllers: [AckController],
  // A provider too, for FastPathMiddleware (see LeaseModule).
  providers: [AckService, AckRepository, AckController, HandedOutLeases],
  exports: [AckService, HandedOutLeases],
})
export class AckModule {}
