import {
  ExecutionContext,
  ForbiddenException,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard } from '@nestjs/passport';
import type { Request, Response } from 'express';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { admitTenantRequest } from '../http/connection-roster';
import { RetryLaterException } from '../common/retry-later.exception';
import { credentialProved } from '../http/fair-dispatch';
import { AccessLevel, levelAllows } from './access-level';
import { ACCESS_LEVEL_KEY } from './access.decorator';
import { readClaim } from './claim-path';
import { Principal, ROLES } from './principal';
import { PRINCIPAL_KEY } from './principal.decorator';
import { resolveTenant } from './tenant-resolution';
import { rolesOf, subjectOf, TokenClaims } from './token-claims';
import { AUTHENTICATION_REQUIRED, describeTokenProblem } from './token-problem';

export const INSUFFICIENT_PERMISSIONS = 'Insufficient permissions';
export const TOKEN_WITHOUT_TENANT = 'Token has no tenant claim';
export const TOO_MANY_CONNECTIONS = 'too many connections';
export const TOO_MANY_IN_FLIGHT = 'too many requests in flight';

/**
 * Routes without an @Access level are admin-only, so a forgotten decorator fails closed. Refusals go 401, then 403
 * for the role, then the tenant's 400/403, so a caller without the role learns nothing about its tenant's handling.
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
    const response = context.switchToHttp().getResponse<Response>();
    const limit = admitTenantRequest(request, response, principal.tenantId);
    if (limit === 'connections') {
      // The connection is the thing in excess: the client opens it again when it has one to spare.
      response.setHeader('Connection', 'close');
      throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_CONNECTIONS, 1);
    }
    if (limit === 'requests') throw new RetryLaterException(HttpStatus.TOO_MANY_REQUESTS, TOO_MANY_IN_FLIGHT, 1);
    credentialProved(request, principal.tenantId);
    return true;
  }

  override handleRequest<TUser = TokenClaims>(
    error: unknown,
    user: TUser | false,
    info: unknown,
    context: ExecutionContext,
  ): TUser {
    if (!error && user) {
      return user;
    }
    // RFC 6750: a 401 names the bearer scheme, with invalid_token when a token was sent but not accepted.
    const response = context.switchToHttp().getResponse<Response>();
    if (error instanceof HttpException) {
      // An identity provider out of reach (503) says nothing about the token.
      if (error instanceof UnauthorizedException) {
        response.setHeader('WWW-Authenticate', 'Bearer error="invalid_token"');
      }
      throw error;
    }
    const text = describeTokenProblem(error ?? info);
    response.setHeader(
      'WWW-Authenticate',
      text === AUTHENTICATION_REQUIRED ? 'Bearer' : 'Bearer error="invalid_token"',
    );
    throw new UnauthorizedException({ error: text });
  }

  private async authenticate(context: ExecutionContext, request: Request, level: AccessLevel): Promise<Principal> {
    await super.canActivate(context);
    const claims = request.user as TokenClaims;
    const roles = rolesOf(claims, this.config.jwt.rolesClaim);
    if (!levelAllows(level, roles)) {
      throw new ForbiddenException({ error: INSUFFICIENT_PERMISSIONS });
    }
    const tenantClaim = readClaim(claims, this.config.jwt.tenantClaim);
    if (this.config.jwt.requireTenant && tenantClaim === undefined) {
      throw new ForbiddenException({ error: TOKEN_WITHOUT_TENANT });
    }
    const tenantId = resolveTenant({
      claim: tenantClaim,
      header: this.headerTenant(request),
      defaultTenantId: this.config.defaultTenantId,
    });
    return { subject: subjectOf(claims), roles, tenantId };
  }

  private anonymous(request: Request): Principal {
    const tenantId = resolveTenant({
      header: this.headerTenant(request),
      defaultTenantId: this.config.defaultTenantId,
    });
    return { subject: undefined, roles: [...ROLES], tenantId };
  }

  private headerTenant(request: Request): string | undefined {
    const name = this.config.tenantHeader;
    if (!name) return undefined;
    const value = request.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  }
}
