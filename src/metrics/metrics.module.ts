import { Global, Module } from '@nestjs/common';
import { HealthModule } from '../health/health.module';
import { WakeupModule } from '../wakeup/wakeup.module';
import { MetricsExposition } from './metrics-exposition';
import { MetricsController } from './metrics.controller';
import { MetricsRepository } from './metrics.repository';
import { MetricsServer } from './metrics.server';
import { MetricsService } from './metrics.service';
import { ScrapeCollector } from './scrape-collector';

@Global()
@Module({
  imports: [WakeupModule, HealthModule],
  controllers: [MetricsController],
  providers: [MetricsService, MetricsRepository, ScrapeCollector, MetricsExposition, MetricsServer],
  exports: [MetricsService],
})
export class MetricsModule {}
