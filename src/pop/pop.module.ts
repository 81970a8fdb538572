import { Module } from '@nestjs/common';
import { WakeupModule } from '../wakeup/wakeup.module';
import { PopController } from './pop.controller';
import { PopRepository } from './pop.repository';
import { PopService } from './pop.service';

@Module({
  imports: [WakeupModule],
  controllers: [PopController],
  providers: [PopService, PopRepository],
  exports: [PopRepository],
})
export class PopModule {}
