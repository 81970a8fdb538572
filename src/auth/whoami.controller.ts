import { Controller, Get, Inject, Req } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProperty, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { ApiAuthErrors } from '../common/api-errors.decorator';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { RateLimited } from '../limits/route-class.decorator';
import { Access } from './access.decorator';
import { CurrentPrincipal } from './principal.decorator';
import { Principal, ROLES } from './principal';

export class WhoAmIDto {
  @ApiProperty({ example: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90', description: 'The tenant every call acts in' })
  tenant: string;

  @ApiProperty({ enum: ROLES, isArray: true, description: 'Every role when auth is off' })
  roles: string[];

  @ApiProperty({ type: String, nullable: true, example: 'billing-worker', description: "The token's sub" })
  subject: string | null;

  @ApiProperty({ description: 'JWT_ENABLED: whether calls need a token' })
  authEnabled: boolean;

  @ApiProperty({ type: String, nullable: true, description: "The token's exp; null without a token" })
  expiresAt: string | null;
}

@ApiTags('auth')
@ApiAuthErrors('the token was refused')
@RateLimited('manage')
@Controller('api/v1/whoami')
export class WhoAmIController {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  @Get()
  @Access('any-role')
  @ApiOperation({
    summary: 'Who the broker takes the caller for: tenant, roles, subject',
    description: 'Any role may ask; what a console or a client shows before it calls anything else.',
  })
  @ApiOkResponse({ type: WhoAmIDto })
  whoami(@CurrentPrincipal() principal: Principal, @Req() request: Request): WhoAmIDto {
    const claims: { exp?: unknown } | undefined = request.user;
    const exp = claims?.exp;
    return {
      tenant: principal.tenantId,
      roles: [...principal.roles],
      subject: principal.subject ?? null,
      authEnabled: this.config.jwt.enabled,
      expiresAt: typeof exp === 'number' ? new Date(exp * 1000).toISOString() : null,
    };
  }
}
