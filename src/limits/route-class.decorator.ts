import { SetMetadata } from '@nestjs/common';
import { RateLimits } from '../config/app-config';

/** The rate-limit class of a route: each has its own per-tenant budget (RATE_LIMIT_*). */
export type RouteClass = keyof RateLimits;

export const ROUTE_CLASS = 'leasehold:route-class';

export const RateLimited = (routeClass: RouteClass): ClassDecorator & MethodDecorator =>
  SetMetadata(ROUTE_CLASS, routeClass);
