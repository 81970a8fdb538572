import { FastRoute } from './http/fast-path.middleware';
import { LeaseController } from './lease/lease.controller';
import { leaseExtendParams } from './lease/lease-route';
import { PushController } from './push/push.controller';
import { pushParams } from './push/push-route';

/** Each controller is also a provider of its module, where Nest resolves the route's pipes and guards. */
export const FAST_ROUTE_TABLE: readonly FastRoute[] = [
  { controller: LeaseController, handler: 'extend', match: leaseExtendParams },
  { controller: PushController, handler: 'push', match: pushParams },
];
