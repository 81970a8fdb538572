import { Module } from '@nestjs/common';
import { PopModule } from '../pop/pop.module';
import { QueuesModule } from '../queues/queues.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { ConsumerGroupsController } from './consumer-groups.controller';
import { ConsumerGroupsRepository } from './consumer-groups.repository';
import { ConsumerGroupsService } from './consumer-groups.service';

@Module({
  imports: [WakeupModule, PopModule, QueuesModule],
  controllers: [ConsumerGroupsController],
  providers: [ConsumerGroupsService, ConsumerGroupsRepository],
})
export class ConsumerGroupsModule {}
