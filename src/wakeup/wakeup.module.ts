import { Module } from '@nestjs/common';
import { WakeupService } from './wakeup.service';

@Module({ providers: [WakeupService], exports: [WakeupService] })
export class WakeupModule {}
