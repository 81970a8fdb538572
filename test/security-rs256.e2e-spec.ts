import { generateKeyPairSync } from 'node:crypto';
import { NestExpressApplication } from '@nestjs/platform-express';
import { sign } from 'jsonwebtoken';
import request from 'supertest';
import { Database } from '../src/database/database';
import { mintToken } from '../src/auth/token-minting';
import { uuidv7 } from '../src/common/uuid';
import { APP_CONFIG, AppConfig } from '../src/config/app-config';
import { createLease, expiries } from './support/lease-fixture';
import { createTestApp, newTenant } from './support/test-app';
import { hmacTokenWithKeyText, hsToken, rs256TokenFromAnyKey, unsignedToken } from './support/tokens';

/*
 * A file of its own: passport keeps strategies in a process-wide registry, so
 * one process (one jest test file) serves one JWT configuration, as the
 * broker does in production.
 */
describe('security with JWT_ALGORITHM=RS256', () => {
  const pair = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  let app: NestExpressApplication;
  let dataSource: Database;

  beforeAll(async () => {
    app = await createTestApp({
      JWT_ENABLED: 'true',
      JWT_ALGORITHM: 'RS256',
      JWT_PUBLIC_KEY: pair.publicKey,
      JWT_PRIVATE_KEY: pair.privateKey,
    });
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  const extend = (bearer: string, leaseId = uuidv7()) =>
    request(app.getHttpServer())
      .post(`/api/v1/lease/${leaseId}/extend`)
      .set('authorization', `Bearer ${bearer}`)
      .send({ seconds: 600 });

  it('accepts an RS256 token signed with the matching private key: 200 and renewed', async () => {
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    const bearer = sign({ role: 'read-write', tenant }, pair.privateKey, { algorithm: 'RS256', expiresIn: '5m' });

    const response = await extend(bearer, lease.leaseId);

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ success: true, renewed: 1 });
  });

  it('accepts a token minted by the token command from JWT_PRIVATE_KEY with 200', async () => {
    const { jwt } = app.get<AppConfig>(APP_CONFIG);
    const { token } = mintToken({ roles: ['admin'], tenant: newTenant(), ttlSeconds: 60 }, jwt);

    expect((await extend(token)).status).toBe(200);
  });

  it('refuses HS256 signed with the public key text as the HMAC secret (algorithm confusion) with 401', async () => {
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    const before = await expiries(dataSource, tenant, lease.partitionIds);

    const response = await extend(hmacTokenWithKeyText({ role: 'admin', tenant }, pair.publicKey), lease.leaseId);

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: 'Invalid token: algorithm not accepted' });
    expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
  });

  it.each([
    ['signed by another RSA key', () => rs256TokenFromAnyKey({ role: 'admin' }), 'Invalid token: invalid signature'],
    [
      'RS512 with the right key (algorithm pinned to RS256)',
      () => sign({ role: 'admin' }, pair.privateKey, { algorithm: 'RS512', expiresIn: '5m' }),
      'Invalid token: algorithm not accepted',
    ],
    ['alg none', () => unsignedToken({ role: 'admin' }), 'Invalid token: unsigned tokens are not accepted'],
    ['HS256 with some secret', () => hsToken({ role: 'admin' }), 'Invalid token: algorithm not accepted'],
  ])('refuses a token %s with 401', async (_case, bearer, reason) => {
    const response = await extend(bearer());

    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: reason });
  });
});
