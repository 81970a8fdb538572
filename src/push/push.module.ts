import { Module } from '@nestjs/common';
import { QueuesModule } from '../queues/queues.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { PushController } from './push.controller';
import { PushRepository } from './push.repository';
import { PushService } from './push.service';

@Module({
  imports: [QueuesModule, WakeupModule],
  controllers: [PushController],
  providers: [PushService, PushRepository, PushController],
  exports: [PushService],
})
export class PushModule {}
