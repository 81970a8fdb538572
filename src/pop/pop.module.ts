import { Module } from '@nestjs/common';
import { QueuesModule } from '../queues/queues.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { PopController } from './pop.controller';
import { PopRepository } from './pop.repository';
import { PopService } from './pop.service';

@Module({
  imports: [QueuesModule, WakeupModule],
  controllers: [PopController],
  providers: [PopService, PopRepository],
})
export class PopModule {}
