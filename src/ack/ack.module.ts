import { Module } from '@nestjs/common';
import { AckController } from './ack.controller';
import { AckRepository } from './ack.repository';
import { AckService } from './ack.service';

@Module({
  controllers: [AckController],
  providers: [AckService, AckRepository],
})
export class AckModule {}
