import { Module } from '@nestjs/common';
import { LeaseFastPathMiddleware } from './lease-fast-path.middleware';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';
import { RenewalBatcher } from './renewal-batcher';

@Module({
  controllers: [LeaseController],
  providers: [LeaseService, LeaseRepository, RenewalBatcher, LeaseFastPathMiddleware],
  exports: [LeaseService],
})
export class LeaseModule {}
