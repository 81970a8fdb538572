import { Module } from '@nestjs/common';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';
import { RenewalBatcher } from './renewal-batcher';

@Module({
  controllers: [LeaseController],
  providers: [LeaseService, LeaseRepository, RenewalBatcher],
  exports: [LeaseService],
})
export class LeaseModule {}
