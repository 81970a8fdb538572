import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { FastPathMiddleware } from './http/fast-path.middleware';
import { FastRouteTable } from './http/fast-route-table';
import { AckModule } from './ack/ack.module';
import { AuthModule } from './auth/auth.module';
import { ConfigModule } from './config/config.module';
import { ConsumerGroupsModule } from './consumer-groups/consumer-groups.module';
import { DatabaseModule } from './database/database.module';
import { DlqModule } from './dlq/dlq.module';
import { EncryptionModule } from './encryption/encryption.module';
import { HealthModule } from './health/health.module';
import { HistoryModule } from './history/history.module';
import { LeaseModule } from './lease/lease.module';
import { LifecycleModule } from './lifecycle/lifecycle.module';
import { LimitsModule } from './limits/limits.module';
import { LoggingModule } from './logging/logging.module';
import { MaintenanceModule } from './maintenance/maintenance.module';
import { MessagesModule } from './messages/messages.module';
import { MetricsModule } from './metrics/metrics.module';
import { PopModule } from './pop/pop.module';
import { PushModule } from './push/push.module';
import { QueuesModule } from './queues/queues.module';
import { RetentionModule } from './retention/retention.module';
import { TracesModule } from './traces/traces.module';
import { TransactionModule } from './transaction/transaction.module';
import { StreamsModule } from './streams/streams.module';

@Module({
  imports: [
    DiscoveryModule,
    ConfigModule,
    LoggingModule,
    DatabaseModule,
    EncryptionModule,
    LifecycleModule,
    MetricsModule,
    HistoryModule,
    LimitsModule,
    MaintenanceModule,
    AuthModule,
    HealthModule,
    LeaseModule,
    PushModule,
    PopModule,
    AckModule,
    TransactionModule,
    StreamsModule,
    QueuesModule,
    DlqModule,
    ConsumerGroupsModule,
    MessagesModule,
    RetentionModule,
    TracesModule,
  ],
  providers: [FastRouteTable, FastPathMiddleware],
})
export class AppModule {}
