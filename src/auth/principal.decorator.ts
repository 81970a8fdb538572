import { createParamDecorator, ExecutionContext, InternalServerErrorException } from '@nestjs/common';
import { Principal } from './principal';

export const PRINCIPAL_KEY = 'leaseholdPrincipal';

export function principalOf(request: object): Principal | undefined {
  return (request as Record<string, Principal | undefined>)[PRINCIPAL_KEY];
}

export function tenantIdOf(request: object): string {
  const principal = principalOf(request);
  if (!principal) {
    // A route reached without the guard is a wiring bug, not a caller error.
    throw new InternalServerErrorException({ error: 'no principal' });
  }
  return principal.tenantId;
}

export const TenantId = createParamDecorator((_data: unknown, context: ExecutionContext): string =>
  tenantIdOf(context.switchToHttp().getRequest()),
);

export const CurrentPrincipal = createParamDecorator(
  (_data: unknown, context: ExecutionContext): Principal | undefined =>
    principalOf(context.switchToHttp().getRequest()),
);
