import { InitialSchema1796031809241 } from '../../migrations/1796031809241-InitialSchema';
import { ConsumerDeliveredOffset1796032521539 } from '../../migrations/1796032521539-ConsumerDeliveredOffset';
import { HotLeaseRenewals1796037387818 } from '../../migrations/1796037387818-HotLeaseRenewals';
import { MessagePayloadBytes1796091820254 } from '../../migrations/1796091820254-MessagePayloadBytes';
import { EagerCursors1796104437615 } from '../../migrations/1796104437615-EagerCursors';
import { LeaseFencing1796200000000 } from '../../migrations/1796200000000-LeaseFencing';
import { Retention1796300000000 } from '../../migrations/1796300000000-Retention';
import { DeliveryOptions1796400000000 } from '../../migrations/1796400000000-DeliveryOptions';
import { Maintenance1796500000000 } from '../../migrations/1796500000000-Maintenance';
import { DeadLettersByMessage1796600000000 } from '../../migrations/1796600000000-DeadLettersByMessage';
import { QueueNamespaces1796700000000 } from '../../migrations/1796700000000-QueueNamespaces';
import { LeaseRenewals1796800000000 } from '../../migrations/1796800000000-LeaseRenewals';
import { Brokers1796900000000 } from '../../migrations/1796900000000-Brokers';
import { PayloadText1797050000000 } from '../../migrations/1797050000000-PayloadText';
import { StoredUsage1797500000000 } from '../../migrations/1797500000000-StoredUsage';
import { ReadyCursors1797600000000 } from '../../migrations/1797600000000-ReadyCursors';
import { QueueCounters1797700000000 } from '../../migrations/1797700000000-QueueCounters';
import { RetentionDue1797800000000 } from '../../migrations/1797800000000-RetentionDue';
import { QueuePartitionCounters1797900000000 } from '../../migrations/1797900000000-QueuePartitionCounters';
import { RetentionRecheckQueues1797950000000 } from '../../migrations/1797950000000-RetentionRecheckQueues';
import { DeliveryControls1798000000000 } from '../../migrations/1798000000000-DeliveryControls';
import { Encryption1798100000000 } from '../../migrations/1798100000000-Encryption';
import { Traces1798200000000 } from '../../migrations/1798200000000-Traces';
import { Streams1798300000000 } from '../../migrations/1798300000000-Streams';
import { QueueHistory1798400000000 } from '../../migrations/1798400000000-QueueHistory';
import { StreamStateUsage1798500000000 } from '../../migrations/1798500000000-StreamStateUsage';
import { LeaseLostGuard1798600000000 } from '../../migrations/1798600000000-LeaseLostGuard';

/** Listed explicitly so the compiled app, the CLI and jest load the same set. */
export const MIGRATIONS = [
  InitialSchema1796031809241,
  ConsumerDeliveredOffset1796032521539,
  HotLeaseRenewals1796037387818,
  MessagePayloadBytes1796091820254,
  EagerCursors1796104437615,
  LeaseFencing1796200000000,
  Retention1796300000000,
  DeliveryOptions1796400000000,
  Maintenance1796500000000,
  DeadLettersByMessage1796600000000,
  QueueNamespaces1796700000000,
  LeaseRenewals1796800000000,
  Brokers1796900000000,
  PayloadText1797050000000,
  StoredUsage1797500000000,
  ReadyCursors1797600000000,
  QueueCounters1797700000000,
  RetentionDue1797800000000,
  QueuePartitionCounters1797900000000,
  RetentionRecheckQueues1797950000000,
  DeliveryControls1798000000000,
  Encryption1798100000000,
  Traces1798200000000,
  Streams1798300000000,
  QueueHistory1798400000000,
  StreamStateUsage1798500000000,
  LeaseLostGuard1798600000000,
];

/** TypeORM's default name, kept so databases migrated by earlier versions and by its CLI read the same table. */
export const MIGRATIONS_TABLE = 'migrations';
