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
  providers: [StreamsService, StreamsRepository, CycleRequestPipe],
})
export class StreamsModule {}
