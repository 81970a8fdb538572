import { Module } from '@nestjs/common';
import { AckModule } from '../ack/ack.module';
import { PushModule } from '../push/push.module';
import { QueuesModule } from '../queues/queues.module';
import { TransactionModule } from '../transaction/transaction.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { CycleRequestPipe } from './cycle-request.pipe';
import { StreamsController } from './streams.controller';
import { StreamsRepository } from './streams.repository';
import { StreamsService } from './streams.service';

@Module({
  imports: [WakeupModule, PushModule, AckModule, QueuesModule, TransactionModule],
  controllers: [StreamsController],
  // A provider too, for the fast path: Nest resolves a handler's enhancers and pipes from its host's module.
  providers: [StreamsService, StreamsRepository, CycleRequestPipe, StreamsController],
})
export class StreamsModule {}
