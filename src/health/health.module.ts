import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';
import { DatabaseProbe } from './database-probe';
import { ProbeService } from './probe.service';
import { ReadinessService } from './readiness.service';

// Terminus logs nothing itself: a failed readiness check is the answer, and the database's failures are logged where they happen.
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [DatabaseProbe, ProbeService, ReadinessService],
  exports: [ProbeService],
})
export class HealthModule {}
