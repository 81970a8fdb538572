import { BrokerEntity } from './broker.entity';
import { ConsumerGroupEntity } from './consumer-group.entity';
import { ConsumerEntity } from './consumer.entity';
import { DeadLetterEntity } from './dead-letter.entity';
import { MaintenanceEntity } from './maintenance.entity';
import { MessageEntity } from './message.entity';
import { PartitionEntity } from './partition.entity';
import { QueueEntity } from './queue.entity';
import { TenantUsageEntity } from './tenant-usage.entity';

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
];
