import { Module } from '@nestjs/common';
import { PushModule } from '../push/push.module';
import { QueuesModule } from '../queues/queues.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { MessagesController } from './messages.controller';
import { MessagesRepository } from './messages.repository';
import { MessagesService } from './messages.service';

@Module({
  imports: [WakeupModule, PushModule, QueuesModule],
  controllers: [MessagesController],
  providers: [MessagesService, MessagesRepository],
})
export class MessagesModule {}
