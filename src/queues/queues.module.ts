import { Module } from '@nestjs/common';
import { QueuesController } from './queues.controller';
import { QueuesRepository } from './queues.repository';
import { QueuesService } from './queues.service';

@Module({
  controllers: [QueuesController],
  providers: [QueuesService, QueuesRepository],
  exports: [QueuesRepository],
})
export class QueuesModule {}
