import { Module } from '@nestjs/common';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';
import { RenewalBatcher } from './renewal-batcher';

@Module({
  controllers: [LeaseController],
  // The controller is a provider too, for FastPathMiddleware: Nest resolves a handler's enhancers and parameter pipes
  // from the module that provides its host.
  providers: [LeaseService, LeaseRepository, RenewalBatcher, LeaseController],
  exports: [LeaseService],
})
export class LeaseModule {}
