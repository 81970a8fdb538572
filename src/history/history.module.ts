import { Global, Module } from '@nestjs/common';
import { HistoryController } from './history.controller';
import { HistoryRecorder } from './history-recorder';
import { HistoryRepository } from './history.repository';
import { HistoryService } from './history.service';

/** Global: push, pop and ack count into the recorder, and the retention job deletes old buckets. */
@Global()
@Module({
  controllers: [HistoryController],
  providers: [HistoryRecorder, HistoryRepository, HistoryService],
  exports: [HistoryRecorder, HistoryRepository],
})
export class HistoryModule {}
