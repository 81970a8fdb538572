import { ExecutionContext, HttpException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { sign, SignOptions } from 'jsonwebtoken';
import { AppConfig } from '../config/app-config';
import { DEFAULT_TENANT_ID, loadConfig } from '../config/load-config';
import { AccessLevel } from './access-level';
import { Access } from './access.decorator';
import { AccessGuard } from './access.guard';
import { JwtStrategy } from './jwt.strategy';
import { Principal } from './principal';
import { principalOf } from './principal.decorator';
import { TokenVerifier } from './token-verifier';

const SECRET = 'access-guard-spec-secret-of-thirty-two-bytes';
const TENANT = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90';
const OTHER_TENANT = '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a91';

interface Call {
  context: ExecutionContext;
  request: { headers: Record<string, string> };
  response: { setHeader: jest.Mock };
}

/** A controller carrying `@Access` where asked, reached through a fake HTTP execution context. */
function call(levels: { handler?: AccessLevel; controller?: AccessLevel }, headers: Record<string, string> = {}): Call {
  class FakeController {
    handle(): void {}
  }
  if (levels.controller) Access(levels.controller)(FakeController);
  if (levels.handler) {
    const descriptor = Object.getOwnPropertyDescriptor(FakeController.prototype, 'handle')!;
    Access(levels.handler)(FakeController.prototype, 'handle', descriptor);
  }
  const request = { headers };
  const response = { setHeader: jest.fn() };
  const context = new ExecutionContextHost(
    [request, response, jest.fn()],
    FakeController,
    FakeController.prototype.handle,
  );
  return { context, request, response };
}

function guardFor(env: Record<string, string>): AccessGuard {
  const config: AppConfig = loadConfig(env);
  // Registers the 'jwt' strategy with passport for this configuration.
  new JwtStrategy(new TokenVerifier(config));
  return new AccessGuard(new Reflector(), config);
}

const authOn = (env: Record<string, string> = {}) => guardFor({ JWT_ENABLED: 'true', JWT_SECRET: SECRET, ...env });
/** A valid HS256 bearer header; five minutes of life unless the claims carry their own exp. */
const bearer = (claims: Record<string, unknown>) => {
  const options: SignOptions = 'exp' in claims ? { algorithm: 'HS256' } : { algorithm: 'HS256', expiresIn: '5m' };
  return { authorization: `Bearer ${sign(claims, SECRET, options)}` };
};

async function principal(guard: AccessGuard, target: Call): Promise<Principal | undefined> {
  await expect(guard.canActivate(target.context)).resolves.toBe(true);
  return principalOf(target.request);
}

async function refusal(guard: AccessGuard, target: Call): Promise<[number, unknown]> {
  try {
    await guard.canActivate(target.context);
  } catch (error) {
    if (error instanceof HttpException) return [error.getStatus(), error.getResponse()];
    throw error;
  }
  throw new Error('the guard let the request through');
}

describe('AccessGuard', () => {
  describe('route levels from handler and controller metadata', () => {
    it('lets anyone through a public handler, with auth on and no token', async () => {
      const target = call({ handler: 'public', controller: 'admin' });

      await expect(authOn().canActivate(target.context)).resolves.toBe(true);
    });

    it("applies the controller's level to a handler without its own (403 for read-only on read-write)", async () => {
      const target = call({ controller: 'read-write' }, bearer({ role: 'read-only', tenant: TENANT }));

      expect(await refusal(authOn(), target)).toEqual([403, { error: 'Insufficient permissions' }]);
    });

    it("lets the handler's level override the controller's", async () => {
      const target = call({ handler: 'read-only', controller: 'admin' }, bearer({ role: 'read-only', tenant: TENANT }));

      expect(await principal(authOn(), target)).toMatchObject({ roles: ['read-only'], tenantId: TENANT });
    });

    it('treats a route without any level as admin-only (403 for read-write, allowed for admin)', async () => {
      const guard = authOn();

      expect(await refusal(guard, call({}, bearer({ role: 'read-write' })))).toEqual([
        403,
        { error: 'Insufficient permissions' },
      ]);
      expect(await principal(guard, call({}, bearer({ role: 'admin', tenant: TENANT })))).toMatchObject({
        roles: ['admin'],
      });
    });

    it.each([
      ['read-only', 'write', 403],
      ['write-only', 'read-only', 403],
      ['write-only', 'write', 200],
      ['read-write', 'write', 200],
      ['read-only', 'read-only', 200],
    ])('role %s on a %s route answers %p', async (role, level, status) => {
      const target = call({ handler: level as AccessLevel }, bearer({ role, tenant: TENANT }));
      const guard = authOn();

      if (status === 200) {
        expect(await principal(guard, target)).toMatchObject({ roles: [role] });
      } else {
        expect(await refusal(guard, target)).toEqual([403, { error: 'Insufficient permissions' }]);
      }
    });

    it.each([
      ['roles as a string', { roles: 'admin' }],
      ['a differently cased role', { role: 'ADMIN' }],
      ['no role claim', {}],
    ])('refuses a token with %s with 403', async (_case, claims) => {
      const target = call({ handler: 'read-only' }, bearer({ ...claims, tenant: TENANT }));

      expect(await refusal(authOn(), target)).toEqual([403, { error: 'Insufficient permissions' }]);
    });
  });

  describe('authentication', () => {
    it('answers 401 "Authentication required" with a Bearer challenge when no token is sent', async () => {
      const target = call({ handler: 'read-only' });

      expect(await refusal(authOn(), target)).toEqual([401, { error: 'Authentication required' }]);
      expect(target.response.setHeader).toHaveBeenCalledWith('WWW-Authenticate', 'Bearer');
    });

    it.each(['Bearer', 'Bearer ', 'Bearer    ', 'Basic dXNlcjpwYXNz', 'token-without-scheme'])(
      'answers 401 "Authentication required" for the authorization header %p',
      async (authorization) => {
        const target = call({ handler: 'read-only' }, { authorization });

        expect(await refusal(authOn(), target)).toEqual([401, { error: 'Authentication required' }]);
      },
    );

    it('answers 401 with invalid_token for a token signed with another secret', async () => {
      const forged = sign({ role: 'admin', tenant: TENANT }, 'another-secret', { expiresIn: '5m' });
      const target = call({ handler: 'read-only' }, { authorization: `Bearer ${forged}` });

      expect(await refusal(authOn(), target)).toEqual([401, { error: 'Invalid token: invalid signature' }]);
      expect(target.response.setHeader).toHaveBeenCalledWith('WWW-Authenticate', 'Bearer error="invalid_token"');
    });

    it('answers 401 for a token without exp, which would otherwise never expire', async () => {
      const forever = sign({ role: 'admin', tenant: TENANT }, SECRET, { algorithm: 'HS256' });
      const target = call({ handler: 'read-only' }, { authorization: `Bearer ${forever}` });

      expect(await refusal(authOn(), target)).toEqual([401, { error: 'Invalid token: no expiry (exp)' }]);
    });

    it('answers 401 for a token whose payload is not an object', async () => {
      const target = call({ handler: 'read-only' }, { authorization: `Bearer ${sign('just-a-string', SECRET)}` });

      expect(await refusal(authOn(), target)).toEqual([401, { error: 'Invalid token: malformed' }]);
    });

    it('accepts a token that expired within the clock skew', async () => {
      const now = Math.floor(Date.now() / 1000);
      const target = call({ handler: 'read-only' }, bearer({ role: 'read-only', tenant: TENANT, exp: now - 5 }));

      expect(await principal(authOn({ JWT_CLOCK_SKEW_SECONDS: '30' }), target)).toMatchObject({ roles: ['read-only'] });
    });

    it('answers 401 "Token expired" past the clock skew without disclosing when', async () => {
      const now = Math.floor(Date.now() / 1000);
      const target = call({ handler: 'read-only' }, bearer({ role: 'read-only', exp: now - 60 }));

      expect(await refusal(authOn({ JWT_CLOCK_SKEW_SECONDS: '30' }), target)).toEqual([
        401,
        { error: 'Token expired' },
      ]);
    });

    it('checks roles before the tenant: 403, not 400, for a read-only token with a malformed tenant', async () => {
      const target = call({ handler: 'read-write' }, bearer({ role: 'read-only', tenant: 'acme' }));

      expect(await refusal(authOn(), target)).toEqual([403, { error: 'Insufficient permissions' }]);
    });

    it('records the subject and roles of the token on the principal', async () => {
      const target = call(
        { handler: 'read-only' },
        bearer({ roles: ['read-only', 'admin'], tenant: TENANT, sub: 'w-1' }),
      );

      expect(await principal(authOn(), target)).toEqual({
        subject: 'w-1',
        roles: ['read-only', 'admin'],
        tenantId: TENANT,
      });
    });
  });

  describe('tenant with auth on', () => {
    const header = 'x-queen-tenant';
    const gateway = (env: Record<string, string> = {}) => authOn({ TENANT_HEADER: header, ...env });

    it('takes the tenant from the token claim', async () => {
      const target = call({ handler: 'read-only' }, bearer({ role: 'admin', tenant: TENANT.toUpperCase() }));

      expect(await principal(authOn(), target)).toMatchObject({ tenantId: TENANT });
    });

    it('reads the claim named by JWT_TENANT_CLAIM', async () => {
      const target = call({ handler: 'read-only' }, bearer({ role: 'admin', org: TENANT, tenant: OTHER_TENANT }));

      expect(await principal(authOn({ JWT_TENANT_CLAIM: 'org' }), target)).toMatchObject({ tenantId: TENANT });
    });

    it('does not mistake an inherited property for a tenant claim', async () => {
      const target = call({ handler: 'read-only' }, bearer({ role: 'admin' }));

      expect(
        await principal(authOn({ JWT_TENANT_CLAIM: 'constructor', JWT_REQUIRE_TENANT: 'false' }), target),
      ).toMatchObject({
        tenantId: DEFAULT_TENANT_ID,
      });
    });

    it.each([
      ['a number', 42],
      ['null', null],
      ['an array', [TENANT]],
      ['a name', 'acme'],
    ])('answers 400 invalid tenant for a tenant claim that is %s', async (_case, tenant) => {
      const target = call({ handler: 'read-only' }, bearer({ role: 'admin', tenant }));

      expect(await refusal(authOn(), target)).toEqual([400, { error: 'invalid tenant' }]);
    });

    it('refuses a token without a tenant claim with 403, header or not, by default (JWT_REQUIRE_TENANT)', async () => {
      for (const headers of [bearer({ role: 'admin' }), { ...bearer({ role: 'admin' }), [header]: OTHER_TENANT }]) {
        expect(await refusal(gateway(), call({ handler: 'read-only' }, headers))).toEqual([
          403,
          { error: 'Token has no tenant claim' },
        ]);
      }
    });

    it('refuses the missing role before the missing tenant', async () => {
      expect(await refusal(gateway(), call({ handler: 'admin' }, bearer({ role: 'read-only' })))).toEqual([
        403,
        { error: 'Insufficient permissions' },
      ]);
    });

    it('uses the default tenant for a token without a tenant claim and no header, with JWT_REQUIRE_TENANT=false', async () => {
      const target = call({ handler: 'read-only' }, bearer({ role: 'admin' }));

      expect(await principal(gateway({ JWT_REQUIRE_TENANT: 'false' }), target)).toMatchObject({
        tenantId: DEFAULT_TENANT_ID,
      });
    });

    it('takes the tenant from the trusted header when the token has none, with JWT_REQUIRE_TENANT=false', async () => {
      const target = call({ handler: 'read-only' }, { ...bearer({ role: 'admin' }), [header]: OTHER_TENANT });

      expect(await principal(gateway({ JWT_REQUIRE_TENANT: 'false' }), target)).toMatchObject({
        tenantId: OTHER_TENANT,
      });
    });

    it('answers 403 when the header names another tenant than the token', async () => {
      const target = call(
        { handler: 'read-only' },
        { ...bearer({ role: 'admin', tenant: TENANT }), [header]: OTHER_TENANT },
      );

      expect(await refusal(gateway(), target)).toEqual([403, { error: 'Tenant header does not match token' }]);
    });

    it('accepts a header that agrees with the token', async () => {
      const target = call({ handler: 'read-only' }, { ...bearer({ role: 'admin', tenant: TENANT }), [header]: TENANT });

      expect(await principal(gateway(), target)).toMatchObject({ tenantId: TENANT });
    });

    it('ignores the header entirely when TENANT_HEADER is unset', async () => {
      const target = call({ handler: 'read-only' }, { ...bearer({ role: 'admin', tenant: TENANT }), [header]: 'acme' });

      expect(await principal(authOn(), target)).toMatchObject({ tenantId: TENANT });
    });
  });

  describe('auth off', () => {
    const header = 'x-queen-tenant';

    it('opens every route, even an admin-only one, with every role in the default tenant', async () => {
      const target = call({});

      expect(await principal(guardFor({}), target)).toEqual({
        subject: undefined,
        roles: ['read-only', 'write-only', 'read-write', 'admin'],
        tenantId: DEFAULT_TENANT_ID,
      });
    });

    it('ignores an authorization header', async () => {
      const target = call({ handler: 'admin' }, { authorization: 'Bearer garbage' });

      expect(await principal(guardFor({}), target)).toMatchObject({ tenantId: DEFAULT_TENANT_ID });
    });

    it('honours the trusted header when TENANT_HEADER is set', async () => {
      const target = call({ handler: 'read-write' }, { [header]: TENANT.toUpperCase() });

      expect(await principal(guardFor({ TENANT_HEADER: header }), target)).toMatchObject({ tenantId: TENANT });
    });

    it('answers 400 invalid tenant for a malformed header', async () => {
      const target = call({ handler: 'read-write' }, { [header]: 'acme' });

      expect(await refusal(guardFor({ TENANT_HEADER: header }), target)).toEqual([400, { error: 'invalid tenant' }]);
    });

    it('ignores the header when TENANT_HEADER is unset', async () => {
      const target = call({ handler: 'read-write' }, { [header]: TENANT });

      expect(await principal(guardFor({}), target)).toMatchObject({ tenantId: DEFAULT_TENANT_ID });
    });
  });
});
