import { BadRequestException, ForbiddenException } from '@nestjs/common';
import { isUuid } from '../common/uuid';

export const INVALID_TENANT = 'invalid tenant';
export const TENANT_MISMATCH = 'Tenant header does not match token';

export interface TenantSources {
  claim?: { value: unknown };
  header?: string;
  defaultTenantId: string;
}

/** A header may only confirm a claim; a non-UUID is refused, not skipped: a typo never lands in the default tenant. */
export function resolveTenant({ claim, header, defaultTenantId }: TenantSources): string {
  if (claim !== undefined) {
    const tenantId = parseTenant(claim.value);
    if (header !== undefined && parseTenant(header) !== tenantId) {
      throw new ForbiddenException({ error: TENANT_MISMATCH });
    }
    return tenantId;
  }
  return header !== undefined ? parseTenant(header) : defaultTenantId;
}

export function parseTenant(value: unknown): string {
  if (!isUuid(value)) {
    throw new BadRequestException({ error: INVALID_TENANT });
  }
  return value.toLowerCase();
}
