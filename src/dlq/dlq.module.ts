import { Module } from '@nestjs/common';
import { QueuesModule } from '../queues/queues.module';
import { DlqController } from './dlq.controller';
import { DlqRepository } from './dlq.repository';
import { DlqService } from './dlq.service';

@Module({
  imports: [QueuesModule],
  controllers: [DlqController],
  providers: [DlqService, DlqRepository],
})
export class DlqModule {}
