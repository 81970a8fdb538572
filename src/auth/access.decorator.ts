import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import { AccessLevel } from './access-level';

export const ACCESS_LEVEL_KEY = 'leasehold:access-level';

/** Routes without it are admin-only; protected levels get OpenAPI's bearer mark, so none is documented as open. */
export const Access = (level: AccessLevel) =>
  level === 'public'
    ? SetMetadata(ACCESS_LEVEL_KEY, level)
    : applyDecorators(SetMetadata(ACCESS_LEVEL_KEY, level), ApiBearerAuth());
