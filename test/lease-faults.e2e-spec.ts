import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import request from 'supertest';
import { Database } from '../src/database/database';
import { HeldConnection } from './support/held-connection';
import { createLease, expiries } from './support/lease-fixture';
import { openSession } from './support/pg-session';
import { ScratchDatabase } from './support/scratch-database';
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
      const runner = new HeldConnection(app.get(Database));
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

  // A trigger that makes a statement slow is schema: it goes in a database of its own, where no other test's
  // statements queue behind its DDL. Real PostgreSQL only.
  (onEmbeddedDatabase ? describe.skip : describe)('500 {"error":"renew failed: ..."}', () => {
    let app: NestExpressApplication;
    let database: ScratchDatabase;
    let scratch: Client;

    beforeAll(async () => {
      database = await ScratchDatabase.create('leasehold_slow');
      scratch = await openSession(database.url);
      app = await createTestApp({ DATABASE_URL: database.url, DB_STATEMENT_TIMEOUT_MS: '300' });
    });

    afterAll(async () => {
      await app?.close();
      await scratch?.end();
      await database?.drop();
    });

    it('reports the statement failure and leaves the lease as it was', async () => {
      const tenant = newTenant();
      const dataSource = app.get(Database);
      const lease = await createLease(app, tenant, [30]);
      const before = await expiries(dataSource, tenant, lease.partitionIds);
      // A renewal never waits for row locks: its UPDATE of this tenant's rows is made slow instead.
      await scratch.query(
        `CREATE FUNCTION slow_renewal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$`,
      );
      await scratch.query(
        `CREATE TRIGGER slow_renewal BEFORE UPDATE ON consumers FOR EACH ROW EXECUTE FUNCTION slow_renewal()`,
      );
      try {
        const response = await request(app.getHttpServer())
          .post(`/api/v1/lease/${lease.leaseId}/extend`)
          .set(TENANT_HEADER, tenant)
          .send({ seconds: 120 });

        expect(response.status).toBe(500);
        expect(response.body).toEqual({ error: 'renew failed: statement timeout' });
      } finally {
        await scratch.query('DROP TRIGGER slow_renewal ON consumers');
      }
      expect(await expiries(dataSource, tenant, lease.partitionIds)).toEqual(before);
    });
  });
});
