import { SetMetadata } from '@nestjs/common';
import { AccessLevel } from './access-level';

export const ACCESS_LEVEL_KEY = 'leasehold:access-level';

/** Declares who may call a route; a route without it is admin-only. */
export const Access = (level: AccessLevel) => SetMetadata(ACCESS_LEVEL_KEY, level);
