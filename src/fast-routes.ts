import { AckController } from './ack/ack.controller';
import { ACK_BATCH_ROUTE, ACK_ROUTE } from './ack/ack-route';
import { FastRoute } from './http/fast-path.middleware';
import { LeaseController } from './lease/lease.controller';
import { leaseExtendParams } from './lease/lease-route';
import { PopController } from './pop/pop.controller';
import { POP_PARTITION_ROUTE, POP_QUEUE_ROUTE } from './pop/pop-route';
import { PushController } from './push/push.controller';
import { PUSH_ROUTE } from './push/push-route';

/** Each controller is also a provider of its module, where Nest resolves the route's pipes and guards. */
export const FAST_ROUTE_TABLE: readonly FastRoute[] = [
  { controller: LeaseController, handler: 'extend', match: leaseExtendParams },
  { controller: PushController, handler: 'push', match: PUSH_ROUTE.params },
  { controller: AckController, handler: 'ack', match: ACK_ROUTE.params },
  { controller: AckController, handler: 'ackBatch', match: ACK_BATCH_ROUTE.params },
  { controller: PopController, handler: 'popQueue', match: POP_QUEUE_ROUTE.params },
  { controller: PopController, handler: 'popPartition', match: POP_PARTITION_ROUTE.params },
];
