import { Module } from '@nestjs/common';
import { WakeupModule } from '../wakeup/wakeup.module';
import { AckController } from './ack.controller';
import { AckRepository } from './ack.repository';
import { AckService } from './ack.service';

@Module({
  imports: [WakeupModule],
  controllers: [AckController],
  providers: [AckService, AckRepository],
  exports: [AckService],
})
export class AckModule {}
