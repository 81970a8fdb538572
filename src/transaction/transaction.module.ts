import { Module } from '@nestjs/common';
import { AckModule } from '../ack/ack.module';
import { PushModule } from '../push/push.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { TransactionController } from './transaction.controller';
import { TransactionRepository } from './transaction.repository';
import { TransactionService } from './transaction.service';

@Module({
  imports: [WakeupModule, PushModule, AckModule],
  controllers: [TransactionController],
  // A provider too, for the fast path: Nest resolves a handler's enhancers and pipes from its host's module.
  providers: [TransactionService, TransactionRepository, TransactionController],
  exports: [TransactionRepository],
})
export class TransactionModule {}
