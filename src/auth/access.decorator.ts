import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { AccessLevel } from './access-level';

export const ACCESS_LEVEL_KEY = 'leasehold:access-level';

/**
 * Declares who may call a route (on a handler, or on a controller for all its
 * handlers; the handler's wins). A route without it is admin-only. Every
 * non-public level also marks the route as bearer-protected in the OpenAPI
 * document, so Swagger UI sends the pasted token and no route can be
 * protected yet documented as open.
 */
export const Access = (level: AccessLevel) =>
  level === 'public'
    ? SetMetadata(ACCESS_LEVEL_KEY, level)
    : applyDecorators(SetMetadata(ACCESS_LEVEL_KEY, level), ApiBearerAuth());
