import { BrokerEntity } from './broker.entity';
import { ConsumerGroupEntity } from './consumer-group.entity';
import { ConsumerEntity } from './consumer.entity';
import { DeadLetterEntity } from './dead-letter.entity';
import { MaintenanceEntity } from './maintenance.entity';
import { MessageEntity } from './message.entity';
import { PartitionEntity } from './partition.entity';
import { QueueEntity } from './queue.entity';
import { RetentionRecheckEntity } from './retention-recheck.entity';
import { TenantUsageEntity } from './tenant-usage.entity';
import { GroupLagEntity } from './group-lag.entity';
import { QueueHistoryEntity } from './queue-history.entity';
import { QueueStoredEntity } from './queue-stored.entity';
import { StreamQueryEntity } from './stream-query.entity';
import { StreamStateEntity } from './stream-state.entity';
import { TenantEncryptionKeyEntity } from './tenant-encryption-key.entity';
import { TenantHistoryEntity } from './tenant-history.entity';
import { TraceEntity } from './trace.entity';
import { TraceNameEntity } from './trace-name.entity';
import { TraceNameMessageEntity } from './trace-name-message.entity';
import { TraceNameTotalEntity } from './trace-name-total.entity';

export const ENTITIES = [
  QueueEntity,
  PartitionEntity,
  MessageEntity,
  ConsumerGroupEntity,
  ConsumerEntity,
  DeadLetterEntity,
  MaintenanceEntity,
  BrokerEntity,
  TenantUsageEntity,
  GroupLagEntity,
  QueueStoredEntity,
  RetentionRecheckEntity,
  StreamQueryEntity,
  StreamStateEntity,
  TenantEncryptionKeyEntity,
  TraceEntity,
  TraceNameEntity,
  TraceNameMessageEntity,
  TraceNameTotalEntity,
  QueueHistoryEntity,
  TenantHistoryEntity,
];
