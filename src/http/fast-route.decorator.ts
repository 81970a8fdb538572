import { SetMetadata } from '@nestjs/common';

export const FAST_ROUTE_METADATA = 'leasehold:fast-route';
export const KEEPS_UNDECODABLE_METADATA = 'leasehold:keeps-undecodable';

/**
 * Served ahead of Nest's router by FastPathMiddleware, with the same guards, pipes, filters and answer. A handler it
 * cannot serve that way stops the application at boot, saying why.
 */
export const FastRoute = (): MethodDecorator => SetMetadata(FAST_ROUTE_METADATA, true);

/**
 * On a fast route: these path parameters reach the handler as sent when their percent-encoding does not decode,
 * where Express would answer 400.
 */
export const KeepsUndecodable = (...names: string[]): MethodDecorator => SetMetadata(KEEPS_UNDECODABLE_METADATA, names);
