import { Module } from '@nestjs/common';
import { LeaseController } from './lease.controller';
import { LeaseRepository } from './lease.repository';
import { LeaseService } from './lease.service';
import { RenewalBatcher } from './renewal-batcher';

@Module({
  controllers: [LeaseController],
  // A provider too, for FastPathMiddleware: Nest resolves a handler's enhancers and pipes from its host's module.
  providers: [LeaseService, LeaseRepository, RenewalBatcher, LeaseController],
  exports: [LeaseService],
})
export class LeaseModule {}
