import { Module } from '@nestjs/common';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';

@Module({
  controllers: [LeaseController],
  providers: [LeaseService, LeaseRepository],
  exports: [LeaseService],
})
export class LeaseModule {}
