import { Module } from '@nestjs/common';
import { AckModule } from '../ack/ack.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { DiscoveryPopController } from './discovery-pop.controller';
import { PopController } from './pop.controller';
import { PopRepository } from './pop.repository';
import { PopService } from './pop.service';

@Module({
  imports: [WakeupModule, AckModule],
  controllers: [PopController, DiscoveryPopController],
  // A provider too, for FastPathMiddleware (see LeaseModule).
  providers: [PopService, PopRepository, PopController],
  exports: [PopRepository],
})
export class PopModule {}
