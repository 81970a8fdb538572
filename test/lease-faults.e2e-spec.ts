import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { createLease, expiries } from './support/lease-fixture';
import { lockTenantRows, openSession } from './support/pg-session';
import { answerWithin } from './support/http-wait';
import { TcpProxy } from './support/tcp-proxy';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';

const databaseUrl = () => process.env.DATABASE_URL!;

describe('lease route and health under database faults', () => {
  describe('500 {"error":"pool"}', () => {
    let app: NestExpressApplication;

    beforeAll(async () => {
      app = await createTestApp({ DB_POOL_SIZE: '1', DB_ACQUIRE_TIMEOUT_MS: '300' });
    });

    afterAll(async () => {
      await app.close();
    });

    it('answers within the acquire timeout when every pooled connection is taken', async () => {
      const tenant = newTenant();
      const lease = await createLease(app, tenant, [30]);
      // Take the pool's only connection away for the duration of the request.
      const runner = app.get(DataSource).createQueryRunner();
      await runner.connect();
      try {
        const started = Date.now();
        const response = await request(app.getHttpServer())
          .post(`/api/v1/lease/${lease.leaseId}/extend`)
          .set(TENANT_HEADER, tenant)
          .send({ seconds: 120 });

        expect(response.status).toBe(500);
        expect(response.body).toEqual({ error: 'pool' });
        expect(Date.now() - started).toBeLessThan(3000);
      } finally {
        await runner.release();
      }

      const recovered = await request(app.getHttpServer())
        .post(`/api/v1/lease/${lease.leaseId}/extend`)
        .set(TENANT_HEADER, tenant)
        .send({ seconds: 120 });
      expect(recovered.body).toMatchObject({ success: true, renewed: 1 });
    });
  });

  describe('database unreachable', () => {
    let proxy: TcpProxy;
    let app: NestExpressApplication;

    beforeAll(async () => {
      proxy = TcpProxy.forDatabaseUrl(databaseUrl());
      await proxy.start();
      app = await createTestApp({ DATABASE_URL: proxy.rewrite(databaseUrl()), DB_ACQUIRE_TIMEOUT_MS: '500' });
    });

    afterAll(async () => {
      await app.close();
      await proxy.stop();
    });

    it('GET /health answers 200 with a database round trip, 503 while unreachable, and 200 once it is back', async () => {
      const healthy = await request(app.getHttpServer()).get('/health');
      expect(healthy.status).toBe(200);
      expect(healthy.body).toEqual({ status: 'ok', database: 'up' });

      await proxy.stop();
      // The probe's answer stands for a second (PROBE_INTERVAL_MS), however many ask.
      const down = await answerWithin(() => request(app.getHttpServer()).get('/health'), 503);
      expect(down.body).toEqual({ error: 'database unavailable' });

      const extend = await request(app.getHttpServer())
        .post('/api/v1/lease/0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90/extend')
        .send({ seconds: 10 });
      expect(extend.status).toBe(500);
      expect(extend.body).toEqual({ error: 'pool' });

      await proxy.start();
      await answerWithin(() => request(app.getHttpServer()).get('/health'), 200);
    });
  });

  // PGlite is one backend running one transaction at a time: another session
  // cannot hold a row lock against it, so this needs real PostgreSQL.
  (onEmbeddedDatabase ? describe.skip : describe)('500 {"error":"renew failed: ..."}', () => {
    let app: NestExpressApplication;
    let blocker: Client;

    beforeAll(async () => {
      app = await createTestApp({ DB_STATEMENT_TIMEOUT_MS: '300' });
      blocker = await openSession();
    });

    afterAll(async () => {
      await blocker.end();
      await app.close();
    });

    it('reports the statement failure and leaves the lease as it was', async () => {
      const tenant = newTenant();
      const dataSource = app.get(DataSource);
      const lease = await createLease(app, tenant, [30]);
      const before = await expiries(dataSource, tenant, lease.partitionIds);
      await lockTenantRows(blocker, 'consumers', tenant);
      try {
        const started = Date.now();
        const response = await request(app.getHttpServer())
          .post(`/api/v1/lease/${lease.leaseId}/extend`)
          .set(TENANT_HEADER, tenant)
          .send({ seconds: 120 });

        expect(response.status).toBe(500);
        expect(response.body).toEqual({ error: 'renew failed: statement timeout' });
        expect(Date.now() - started).toBeLessThan(3000);
      } finally {
        await blocker.query('ROLLBACK');
      }
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
    });
  });
});
