import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { AccessLevel } from './access-level';

export const ACCESS_LEVEL_KEY = 'leasehold:access-level';

/**
 * A route without it is admin-only. Non-public levels are also marked bearer-protected in OpenAPI, so no route can be
 * protected yet documented as open.
 */
export const Access = (level: AccessLevel) =>
  level === 'public'
    ? SetMetadata(ACCESS_LEVEL_KEY, level)
    : applyDecorators(SetMetadata(ACCESS_LEVEL_KEY, level), ApiBearerAuth());
