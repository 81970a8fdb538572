import { Module } from '@nestjs/common';
import { QueuesRepository } from './queues.repository';

@Module({
  providers: [QueuesRepository],
  exports: [QueuesRepository],
})
export class QueuesModule {}
