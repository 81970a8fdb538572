import {
  BadRequestException,
  ExecutionContext,
  ForbiddenException,
  Inject,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard } from '@nestjs/passport';
import type { Request } from 'express';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { AccessLevel, ROLES_FOR_LEVEL } from './access-level';
import { ACCESS_LEVEL_KEY } from './access.decorator';
import { Principal, Role, ROLES } from './principal';
import { PRINCIPAL_KEY } from './principal.decorator';
import { TokenClaims } from './jwt.strategy';

/**
 * The one global guard: authenticates through passport-jwt when auth is on,
 * checks the route's access level (class and handler metadata), and resolves
 * the caller's tenant. Routes without an @Access level are admin-only.
 */
@Injectable()
export class AccessGuard extends AuthGuard('jwt') {
  constructor(
    private readonly reflector: Reflector,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    const level =
      this.reflector.getAllAndOverride<AccessLevel | undefined>(ACCESS_LEVEL_KEY, [
        context.getHandler(),
        context.getClass(),
      ]) ?? 'admin';
    if (level === 'public') {
      return true;
    }
    const request = context.switchToHttp().getRequest<Request>();
    const principal = this.config.jwt.enabled
      ? await this.authenticate(context, request, level)
      : this.anonymous(request);
    (request as unknown as Record<string, Principal>)[PRINCIPAL_KEY] = principal;
    return true;
  }

  override handleRequest<TUser = TokenClaims>(error: unknown, user: TUser | false, info: unknown): TUser {
    if (error || !user) {
      throw new UnauthorizedException({ error: describeTokenProblem(error ?? info) });
    }
    return user;
  }

  private async authenticate(context: ExecutionContext, request: Request, level: AccessLevel): Promise<Principal> {
    await super.canActivate(context);
    const claims = request.user as TokenClaims;
    const roles = rolesOf(claims);
    const allowed = ROLES_FOR_LEVEL[level as Exclude<AccessLevel, 'public'>];
    if (!roles.some((role) => allowed.includes(role))) {
      throw new ForbiddenException({ error: 'Insufficient permissions' });
    }
    const tokenTenant = claims[this.config.jwt.tenantClaim];
    const headerTenant = this.headerTenant(request);
    if (tokenTenant !== undefined && tokenTenant !== null) {
      const tenantId = validTenant(tokenTenant);
      // A gateway header may narrow nothing: the signed claim always wins.
      if (headerTenant !== undefined && validTenant(headerTenant) !== tenantId) {
        throw new ForbiddenException({ error: 'Tenant header does not match token' });
      }
      return { subject: subjectOf(claims), roles, tenantId };
    }
    return {
      subject: subjectOf(claims),
      roles,
      tenantId: headerTenant !== undefined ? validTenant(headerTenant) : this.config.defaultTenantId,
    };
  }

  private anonymous(request: Request): Principal {
    const headerTenant = this.headerTenant(request);
    return {
      subject: undefined,
      roles: [...ROLES],
      tenantId: headerTenant !== undefined ? validTenant(headerTenant) : this.config.defaultTenantId,
    };
  }

  private headerTenant(request: Request): string | undefined {
    const name = this.config.tenantHeader;
    if (!name) return undefined;
    const value = request.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  }
}

function validTenant(value: unknown): string {
  if (!isUuid(value)) {
    throw new BadRequestException({ error: 'invalid tenant' });
  }
  return value.toLowerCase();
}

function rolesOf(claims: TokenClaims): Role[] {
  const raw: unknown[] = [];
  if (typeof claims.role === 'string') raw.push(claims.role);
  if (Array.isArray(claims.roles)) raw.push(...claims.roles);
  return raw.filter((role): role is Role => ROLES.includes(role as Role));
}

function subjectOf(claims: TokenClaims): string | undefined {
  return typeof claims.sub === 'string' ? claims.sub : undefined;
}

function describeTokenProblem(problem: unknown): string {
  const name = (problem as { name?: string } | undefined)?.name;
  const message = (problem as { message?: string } | undefined)?.message ?? '';
  if (name === 'TokenExpiredError') return 'Token expired';
  if (name === 'NotBeforeError') return 'Token not yet valid';
  if (!message || /no auth token/i.test(message)) return 'Authentication required';
  // Drop "expected: ..." suffixes so a 401 does not disclose the configured issuer or audience.
  return `Invalid token: ${message.replace(/\.?\s*expected:.*$/i, '')}`;
}
