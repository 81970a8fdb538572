import { Module } from '@nestjs/common';
import { WakeupModule } from '../wakeup/wakeup.module';
import { QueuesController } from './queues.controller';
import { QueuesRepository } from './queues.repository';
import { QueuesService } from './queues.service';

@Module({
  imports: [WakeupModule],
  controllers: [QueuesController],
  providers: [QueuesService, QueuesRepository],
  exports: [QueuesRepository],
})
export class QueuesModule {}
