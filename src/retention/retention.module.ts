import { Module } from '@nestjs/common';
import { RetentionRepository } from './retention.repository';
import { RetentionService } from './retention.service';
import { WakeupModule } from '../wakeup/wakeup.module';

@Module({
  imports: [WakeupModule],
  providers: [RetentionRepository, RetentionService],
  exports: [RetentionService],
})
export class RetentionModule {}
