import { generateKeyPairSync, JsonWebKey, KeyObject, randomUUID, sign as signBytes } from 'node:crypto';
import { createServer, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { sign } from 'jsonwebtoken';
import request from 'supertest';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken } from './support/tokens';
import { waitForValue } from './support/wait';

const ISSUER = 'https://idp.leasehold.test/realms/main';
const AUDIENCE = 'leasehold';
const REFETCH_INTERVAL_MS = 200;
const TIMEOUT_MS = 1_000;

type Algorithm = 'RS256' | 'ES256' | 'EdDSA';

interface SigningKey {
  kid: string;
  algorithm: Algorithm;
  privateKey: KeyObject;
  jwk: JsonWebKey;
}

function signingKey(kid: string, algorithm: Algorithm): SigningKey {
  const { privateKey, publicKey } =
    algorithm === 'RS256'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : algorithm === 'ES256'
        ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
        : generateKeyPairSync('ed25519');
  return { kid, algorithm, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig' } };
}

/** An identity provider's JWKS endpoint; it counts fetches, and can be made to hold them unanswered. */
class KeySetServer {
  keys: SigningKey[] = [];
  fetches = 0;
  hang = false;
  private readonly held: ServerResponse[] = [];
  private readonly server: Server = createServer((_request, response) => {
    this.fetches += 1;
    if (this.hang) {
      this.held.push(response);
      return;
    }
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ keys: this.keys.map((key) => key.jwk) }));
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/protocol/openid-connect/certs`;
  }

  async stop(): Promise<void> {
    for (const response of this.held.splice(0)) response.destroy();
    this.server.closeAllConnections();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Keycloak's shape: the tenant under an organisation, the roles under realm_access. */
function claimsFor(tenant: string, roles: string[] | string): Record<string, unknown> {
  return { org: { id: tenant }, realm_access: { roles }, iss: ISSUER, aud: AUDIENCE, sub: 'svc-orders' };
}

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** jsonwebtoken signs RS256 and ES256; EdDSA is signed by hand, as an identity provider would. */
function tokenOf(key: SigningKey, claims: Record<string, unknown>, kid: string = key.kid): string {
  if (key.algorithm !== 'EdDSA') {
    return sign(claims, key.privateKey, { algorithm: key.algorithm, keyid: kid, expiresIn: '5m' });
  }
  const payload = { ...claims, iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 300 };
  const input = `${encode({ alg: 'EdDSA', typ: 'JWT', kid })}.${encode(payload)}`;
  return `${input}.${signBytes(null, Buffer.from(input), key.privateKey).toString('base64url')}`;
}

/*
 * A file of its own: passport keeps strategies in a process-wide registry, so
 * one process (one jest test file) serves one JWT configuration.
 */
describe('tokens from an identity provider (JWT_JWKS_URL)', () => {
  const provider = new KeySetServer();
  const rsa = signingKey('rsa-1', 'RS256');
  const ec = signingKey('ec-1', 'ES256');
  const ed = signingKey('ed-1', 'EdDSA');
  let app: NestExpressApplication;

  beforeAll(async () => {
    provider.keys = [rsa, ec, ed];
    const url = await provider.start();
    app = await createTestApp({
      JWT_ENABLED: 'true',
      JWT_JWKS_URL: url,
      JWT_ALGORITHMS: 'RS256,ES256,EdDSA',
      JWT_ISSUER: ISSUER,
      JWT_AUDIENCE: AUDIENCE,
      JWT_TENANT_CLAIM: 'org.id',
      JWT_ROLES_CLAIM: 'realm_access.roles',
      JWT_JWKS_REFETCH_INTERVAL_MS: String(REFETCH_INTERVAL_MS),
      JWT_JWKS_TIMEOUT_MS: String(TIMEOUT_MS),
    });
  });

  afterAll(async () => {
    await app?.close();
    await provider.stop();
  });

  const whoami = (bearer: string) =>
    request(app.getHttpServer()).get('/api/v1/whoami').set('authorization', `Bearer ${bearer}`);
  const push = (bearer: string) =>
    request(app.getHttpServer())
      .post('/api/v1/push')
      .set('authorization', `Bearer ${bearer}`)
      .send({ items: [{ queue: `jwks-${randomUUID().slice(0, 8)}`, payload: { n: 1 } }] });

  it.each([
    ['RS256', rsa],
    ['ES256', ec],
    ['EdDSA', ed],
  ])('accepts %s, reading the tenant and the roles from nested claims: 200', async (_algorithm, key) => {
    const tenant = newTenant();

    const response = await whoami(tokenOf(key, claimsFor(tenant, ['read-write', 'offline_access'])));

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ tenant, roles: ['read-write'], subject: 'svc-orders' });
  });

  it('lets a write role push, and refuses a read-only role on the write route with 403', async () => {
    const tenant = newTenant();

    expect((await push(tokenOf(ed, claimsFor(tenant, 'write-only')))).status).toBe(201);
    const refused = await push(tokenOf(ec, claimsFor(tenant, ['read-only'])));
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: 'Insufficient permissions' });
  });

  it('refuses a token without the nested tenant claim with 403', async () => {
    const claims = { ...claimsFor(newTenant(), ['admin']), org: { name: 'acme' } };

    const response = await whoami(tokenOf(rsa, claims));

    expect(response.status).toBe(403);
    expect(response.body).toEqual({ error: 'Token has no tenant claim' });
  });

  it.each([
    [
      'signed by a key the provider does not publish',
      () => tokenOf(signingKey('ed-1', 'EdDSA'), claimsFor(newTenant(), ['admin'])),
      'Invalid token: invalid signature',
    ],
    [
      'of an algorithm not in JWT_ALGORITHMS',
      () =>
        sign(claimsFor(newTenant(), ['admin']), rsa.privateKey, {
          algorithm: 'RS512',
          keyid: 'rsa-1',
          expiresIn: '5m',
        }),
      'Invalid token: algorithm not accepted',
    ],
    [
      'HS256, which a key set never verifies',
      () => hsToken({ ...claimsFor(newTenant(), ['admin']) }, { keyid: 'rsa-1' }),
      'Invalid token: algorithm not accepted',
    ],
    [
      "naming the EC key's kid but signed RS256",
      () => tokenOf(rsa, claimsFor(newTenant(), ['admin']), 'ec-1'),
      'Invalid token: algorithm not accepted',
    ],
    [
      'for another audience',
      () => tokenOf(ec, { ...claimsFor(newTenant(), ['admin']), aud: 'other' }),
      'Invalid token: audience not accepted',
    ],
  ])('refuses a token %s with 401', async (_case, bearer, reason) => {
    const response = await whoami(bearer());

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: reason });
    expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
  });

  it('refuses unknown kids with 401, fetching the key set at most once an interval for them', async () => {
    const before = provider.fetches;
    const started = Date.now();

    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        whoami(tokenOf(ed, claimsFor(newTenant(), ['admin']), `made-up-${randomUUID()}`)),
      ),
    );

    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 401));
    expect(answers[0].body).toEqual({ error: 'Invalid token: unknown signing key' });
    const intervals = Math.ceil((Date.now() - started) / REFETCH_INTERVAL_MS);
    expect(provider.fetches - before).toBeLessThanOrEqual(1 + intervals);
  });

  it('follows a rotation: a new kid is accepted after a refresh, and the removed key is refused from then on', async () => {
    const tenant = newTenant();
    const rotated = signingKey('rsa-2', 'RS256');
    const oldToken = tokenOf(rsa, claimsFor(tenant, ['admin']));
    expect((await whoami(oldToken)).status).toBe(200);

    provider.keys = [rotated, ec, ed];
    // Within the refetch interval the new kid is refused; the first fetch after it finds the key.
    const accepted = await waitForValue(async () => {
      const response = await whoami(tokenOf(rotated, claimsFor(tenant, ['admin'])));
      return response.status === 200 ? response : undefined;
    }, 'the rotated-in key accepted');

    expect(accepted.body).toMatchObject({ tenant, roles: ['admin'] });
    const refused = await whoami(oldToken);
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ error: 'Invalid token: unknown signing key' });
  });

  it('keeps verifying known kids while the provider hangs or is gone, and answers 503 for a new kid within the timeout', async () => {
    const tenant = newTenant();
    provider.hang = true;

    // A known kid never waits for the provider.
    const known = await whoami(tokenOf(ed, claimsFor(tenant, ['read-only'])));
    expect(known.status).toBe(200);

    const timed = async (bearer: string) => {
      const started = Date.now();
      const response = await whoami(bearer);
      return { response, tookMs: Date.now() - started };
    };
    // Right after another fetch an unknown kid is refused at once (401); past the interval it waits for a fetch.
    const hung = await waitForValue(async () => {
      const attempt = await timed(tokenOf(ec, claimsFor(tenant, ['admin']), `next-${randomUUID()}`));
      return attempt.response.status === 503 ? attempt : undefined;
    }, 'a new kid answered 503 while the provider hangs');
    expect(hung.response.body).toEqual({ error: 'Identity provider unavailable' });
    expect(hung.response.headers['retry-after']).toBe('1');
    expect(hung.tookMs).toBeLessThan(TIMEOUT_MS + 5_000);

    await provider.stop();
    const gone = await waitForValue(async () => {
      const response = await whoami(tokenOf(ec, claimsFor(tenant, ['admin']), `gone-${randomUUID()}`));
      return response.status === 503 ? response : undefined;
    }, 'a new kid answered 503 with the provider gone');
    expect(gone.body).toEqual({ error: 'Identity provider unavailable' });
    expect((await whoami(tokenOf(ed, claimsFor(tenant, ['read-only'])))).status).toBe(200);
  });
});
