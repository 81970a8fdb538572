import { BadRequestException, ForbiddenException } from '@nestjs/common';
import { isUuid } from '../common/uuid';

export const INVALID_TENANT = 'invalid tenant';
export const TENANT_MISMATCH = 'Tenant header does not match token';

export interface TenantSources {
  /** The token's tenant claim; `undefined` when there is no token or the claim is absent. */
  claim?: { value: unknown };
  /** The trusted header's value; `undefined` when TENANT_HEADER is unset or the header was not sent. */
  header?: string;
  defaultTenantId: string;
}

/**
 * The caller's tenant, by the contract's precedence: the signed claim, then
 * the gateway's header, then the default tenant. A header may only confirm a
 * claim, never change it, and anything present but not a UUID (including an
 * empty header or a non-string claim) is refused rather than skipped, so a
 * typo can never silently land a caller in the default tenant.
 */
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

/** A tenant id in canonical (lower-case) form, or 400 `invalid tenant`. */
export function parseTenant(value: unknown): string {
  if (!isUuid(value)) {
    throw new BadRequestException({ error: INVALID_TENANT });
  }
  return value.toLowerCase();
}
