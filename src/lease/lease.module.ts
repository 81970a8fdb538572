import { Module } from '@nestjs/common';
import { LeaseFastPathMiddleware } from './lease-fast-path.middleware';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';
import { RenewalBatcher } from './renewal-batcher';

@Module({
  controllers: [LeaseController],
  // LeaseController is a provider too, for LeaseFastPathMiddleware: Nest resolves a handler's enhancers
  // and parameter pipes from the module that provides its host.
  providers: [LeaseService, LeaseRepository, RenewalBatcher, LeaseFastPathMiddleware, LeaseController],
  exports: [LeaseService],
})
export class LeaseModule {}
