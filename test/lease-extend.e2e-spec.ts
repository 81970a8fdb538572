import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { uuidv7 } from '../src/common/uuid';
import { expireLeases, sql } from './support/db-state';
import { createLease, expiries, releaseLease, secondsLeft, secondsUntil } from './support/lease-fixture';
import { rawRequest } from './support/raw-request';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const RESPONSE_KEYS = ['leaseId', 'success', 'renewed', 'newExpiresAt', 'expiresAt', 'lease_expires_at'];

describe('POST /api/v1/lease/:leaseId/extend', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let tenant: string;

  beforeAll(async () => {
    app = await createTestApp();
    dataSource = app.get(Database);
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    tenant = newTenant();
  });

  function extend(leaseId: string, body?: string | object, contentType?: string, asTenant = tenant) {
    const call = request(app.getHttpServer()).post(`/api/v1/lease/${leaseId}/extend`).set(TENANT_HEADER, asTenant);
    if (contentType) call.set('content-type', contentType);
    return body === undefined ? call : call.send(body as string);
  }

  describe('a live lease', () => {
    it('returns 200 with the six keys in order, renewed 1 and one microsecond UTC expiry in three keys', async () => {
      const lease = await createLease(app, tenant, [30]);

      const response = await extend(lease.leaseId, { seconds: 120 });

      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      expect(Object.keys(response.body)).toEqual(RESPONSE_KEYS);
      expect(response.body).toMatchObject({ leaseId: lease.leaseId, success: true, renewed: 1 });
      expect(response.body.newExpiresAt).toMatch(TIMESTAMP);
      expect(response.body.expiresAt).toBe(response.body.newExpiresAt);
      expect(response.body.lease_expires_at).toBe(response.body.newExpiresAt);
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual([response.body.newExpiresAt]);
      const left = await secondsUntil(dataSource, response.body.newExpiresAt);
      expect(left).toBeGreaterThan(115);
      expect(left).toBeLessThanOrEqual(120);
    });

    it('renews every partition of a multi-partition lease in one call and reports the earliest expiry', async () => {
      const lease = await createLease(app, tenant, [10, 400, 20]);

      const response = await extend(lease.leaseId, { seconds: 100 });

      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ success: true, renewed: 3 });
      const [first, second, third] = await secondsLeft(dataSource, tenant, lease.partitionIds);
      expect(first).toBeGreaterThan(95);
      expect(third).toBeGreaterThan(95);
      // The row already expiring later than now + 100 keeps its own expiry.
      expect(second).toBeGreaterThan(390);
      const rows = await expiries(dataSource, tenant, lease.partitionIds);
      expect(response.body.newExpiresAt).toBe([...rows].sort()[0]);
    });

    it('never shortens a lease: a smaller extension leaves the expiry exactly as it was', async () => {
      const lease = await createLease(app, tenant, [600]);
      const [before] = await expiries(dataSource, tenant, lease.partitionIds);

      const response = await extend(lease.leaseId, { seconds: 5 });

      expect(response.body).toMatchObject({ success: true, renewed: 1, newExpiresAt: before });
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual([before]);
    });

    it('is safe to retry: a repeated extension renews again and never moves the expiry backwards', async () => {
      const lease = await createLease(app, tenant, [30]);

      const first = await extend(lease.leaseId, { seconds: 90 });
      const second = await extend(lease.leaseId, { seconds: 90 });

      expect(first.body).toMatchObject({ success: true, renewed: 1 });
      expect(second.body).toMatchObject({ success: true, renewed: 1 });
      expect(second.body.newExpiresAt >= first.body.newExpiresAt).toBe(true);
    });

    it('matches the lease id case-insensitively and echoes the path value verbatim', async () => {
      const lease = await createLease(app, tenant, [30]);
      const upper = lease.leaseId.toUpperCase();

      const response = await extend(upper, { seconds: 90 });

      expect(response.body).toMatchObject({ leaseId: upper, success: true, renewed: 1 });
    });
  });

  describe('lenient body: never a 400, 60 seconds when unusable', () => {
    const defaults: Array<[string, string | undefined, string | undefined]> = [
      ['no body and no content-type', undefined, undefined],
      ['an empty JSON body', '', 'application/json'],
      ['text/plain that is not JSON', 'extend please', 'text/plain'],
      ['malformed JSON sent as application/json', '{"seconds":', 'application/json'],
      ['JSON that is not an object', '[120]', 'application/json'],
      ['a JSON string', '"120"', 'application/json'],
      ['an object without seconds', '{"secs":120}', 'application/json'],
      ['seconds as a string', '{"seconds":"120"}', 'application/json'],
      ['seconds as a fraction', '{"seconds":1.5}', 'application/json'],
      ['seconds as null', '{"seconds":null}', 'application/json'],
      ['seconds as a boolean', '{"seconds":true}', 'application/json'],
      ['seconds as an array', '{"seconds":[120]}', 'application/json'],
      ['seconds beyond 32 bits', '{"seconds":1e12}', 'application/json'],
      ['seconds just above int32', '{"seconds":2147483648}', 'application/json'],
      ['malformed JSON without a content-type', '{"seconds":120', undefined],
      ['a form-encoded body', 'seconds=120', 'application/x-www-form-urlencoded'],
      ['bytes that are not UTF-8', '\xff\xfe\x00', 'application/octet-stream'],
    ];

    it.each(defaults)('treats %s as 60 seconds', async (_case, body, contentType) => {
      const lease = await createLease(app, tenant, [1]);
      const headers: Record<string, string> = { [TENANT_HEADER]: tenant };
      if (contentType) headers['content-type'] = contentType;

      const response = await rawRequest(
        app.getHttpServer(),
        'POST',
        `/api/v1/lease/${lease.leaseId}/extend`,
        headers,
        body,
      );

      expect(response.status).toBe(200);
      const answer = response.body as { success: boolean; renewed: number; newExpiresAt: string };
      expect(answer).toMatchObject({ success: true, renewed: 1 });
      const left = await secondsUntil(dataSource, answer.newExpiresAt);
      expect(left).toBeGreaterThan(55);
      expect(left).toBeLessThanOrEqual(60);
    });

    it('honours seconds sent as JSON without any content-type', async () => {
      const lease = await createLease(app, tenant, [1]);

      const response = await rawRequest(
        app.getHttpServer(),
        'POST',
        `/api/v1/lease/${lease.leaseId}/extend`,
        { [TENANT_HEADER]: tenant },
        '{"seconds":300}',
      );

      expect(await secondsUntil(dataSource, (response.body as { newExpiresAt: string }).newExpiresAt)).toBeGreaterThan(
        295,
      );
    });

    it('honours seconds sent as JSON under text/plain', async () => {
      const lease = await createLease(app, tenant, [1]);

      const response = await extend(lease.leaseId, '{"seconds":300}', 'text/plain');

      expect(await secondsUntil(dataSource, response.body.newExpiresAt)).toBeGreaterThan(295);
    });

    it.each([0, -5, -2147483648])('clamps seconds %p to 1 second', async (seconds) => {
      const lease = await createLease(app, tenant, [0.2]);

      const response = await extend(lease.leaseId, { seconds });

      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      const left = await secondsUntil(dataSource, response.body.newExpiresAt);
      expect(left).toBeGreaterThan(0.5);
      expect(left).toBeLessThanOrEqual(1);
    });

    it('answers 413 in the contract shape for a body above BODY_LIMIT', async () => {
      const small = await createTestApp({ BODY_LIMIT: '1kb' });
      try {
        const lease = await createLease(app, tenant, [30]);
        const response = await request(small.getHttpServer())
          .post(`/api/v1/lease/${lease.leaseId}/extend`)
          .set(TENANT_HEADER, tenant)
          .set('content-type', 'application/json')
          .send(JSON.stringify({ seconds: 120, padding: 'x'.repeat(4096) }));

        expect(response.status).toBe(413);
        expect(response.body).toEqual({ error: 'payload too large' });
        expect(await secondsLeft(dataSource, tenant, lease.partitionIds)).toEqual([expect.any(Number)]);
        expect((await secondsLeft(dataSource, tenant, lease.partitionIds))[0]).toBeLessThanOrEqual(30);
      } finally {
        await small.close();
      }
    });
  });

  describe('nothing renewed: indistinguishable answers', () => {
    async function notRenewedCases(): Promise<Array<[string, string, string]>> {
      const expired = await createLease(app, tenant, [30]);
      await expireLeases(dataSource, tenant, expired.leaseId);
      const acked = await createLease(app, tenant, [30]);
      await releaseLease(app, tenant, acked, 'completed');
      const nacked = await createLease(app, tenant, [30]);
      await releaseLease(app, tenant, nacked, 'failed');
      const foreignTenant = newTenant();
      const foreign = await createLease(app, foreignTenant, [30]);
      return [
        ['unknown id', uuidv7(), tenant],
        ['expired lease', expired.leaseId, tenant],
        ['lease released by ack', acked.leaseId, tenant],
        ['lease released by nack', nacked.leaseId, tenant],
        ["another tenant's lease", foreign.leaseId, tenant],
        ['a path value that is not a UUID', 'not-a-uuid', tenant],
        ['an almost-UUID', `${uuidv7()}0`, tenant],
        ['a path value with a malformed percent-encoding', '%ZZ', tenant],
        ['a path value with a truncated percent-encoded character', '%E0%A4%A', tenant],
      ];
    }

    it('answers 200, success false, renewed 0 and nulls, with the same headers, for every case', async () => {
      const cases = await notRenewedCases();
      const responses = [];
      for (const [name, leaseId, asTenant] of cases) {
        const response = await extend(leaseId, { seconds: 120 }, undefined, asTenant);
        responses.push({ name, leaseId, response });
      }

      for (const { leaseId, response } of responses) {
        expect(response.status).toBe(200);
        expect(Object.keys(response.body)).toEqual(RESPONSE_KEYS);
        expect(response.body).toEqual({
          leaseId,
          success: false,
          renewed: 0,
          newExpiresAt: null,
          expiresAt: null,
          lease_expires_at: null,
        });
      }
      const headerNames = (headers: Record<string, string>) => Object.keys(headers).sort();
      const reference = responses[0].response;
      for (const { response } of responses) {
        expect(headerNames(response.headers)).toEqual(headerNames(reference.headers));
        expect(response.headers['content-type']).toBe(reference.headers['content-type']);
      }
    });

    it('does not resurrect an expired lease', async () => {
      const lease = await createLease(app, tenant, [30]);
      await expireLeases(dataSource, tenant, lease.leaseId);
      const [before] = await expiries(dataSource, tenant, lease.partitionIds);

      await extend(lease.leaseId, { seconds: 120 });

      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual([before]);
      expect((await secondsLeft(dataSource, tenant, lease.partitionIds))[0]).toBeLessThan(0);
    });

    it("leaves another tenant's lease untouched, to the microsecond", async () => {
      const owner = newTenant();
      const lease = await createLease(app, owner, [30, 40]);
      const before = await expiries(dataSource, owner, lease.partitionIds);

      const response = await extend(lease.leaseId, { seconds: 3600 });

      expect(response.body).toMatchObject({ success: false, renewed: 0 });
      expect(await expiries(dataSource, owner, lease.partitionIds)).toEqual(before);
    });

    it('renews only the live rows when some rows of one lease have expired', async () => {
      const lease = await createLease(app, tenant, [30, 30]);
      await sql(
        dataSource,
        `UPDATE consumers SET lease_expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND partition_id = $2`,
        [tenant, lease.partitionIds[1]],
      );

      const response = await extend(lease.leaseId, { seconds: 120 });

      expect(response.body).toMatchObject({ success: true, renewed: 1 });
      const [live, dead] = await secondsLeft(dataSource, tenant, lease.partitionIds);
      expect(live).toBeGreaterThan(115);
      expect(dead).toBeLessThan(0);
    });
  });

  describe('LEASE_MAX_EXTEND_SECONDS', () => {
    it('lowers a larger request to the operator cap', async () => {
      const capped = await createTestApp({ LEASE_MAX_EXTEND_SECONDS: '30' });
      try {
        const lease = await createLease(app, tenant, [1]);
        const response = await request(capped.getHttpServer())
          .post(`/api/v1/lease/${lease.leaseId}/extend`)
          .set(TENANT_HEADER, tenant)
          .send({ seconds: 3600 });

        expect(response.body).toMatchObject({ success: true, renewed: 1 });
        const left = await secondsUntil(dataSource, response.body.newExpiresAt);
        expect(left).toBeGreaterThan(25);
        expect(left).toBeLessThanOrEqual(30);
      } finally {
        await capped.close();
      }
    });
  });
});
